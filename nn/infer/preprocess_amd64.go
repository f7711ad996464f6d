//go:build !purego

package infer

// ycc1AVX2 is ycc1Go for n pixels, n a positive multiple of 8: pixel x of
// pr, pg and pb from y[x], cb[x] and cr[x], with color.YCbCrToRGB's integer
// arithmetic, eight pixels at a time.
//
//go:noescape
func ycc1AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int)

// ycc2AVX2 is ycc2Go for n pixels, n a positive multiple of 16: pixel x
// of pr, pg and pb from y[x], cb[x/2] and cr[x/2], the chroma terms of eight
// samples computed once for sixteen pixels.
//
//go:noescape
func ycc2AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int)

// hdotAVX2 is hdotGo: for each of the Side outputs x, the taps weights
// k[x·taps:] (taps a positive multiple of 8) times the elements of pr, pg
// and pb from first[x], eight at a time, the three sums rounded and
// clamped to bytes and stored at out[x], out[Side+x] and out[2·Side+x].
//
//go:noescape
func hdotAVX2(out *uint8, pr, pg, pb *int32, first *int, k *int32, taps int)

// vdotAVX2 is vdotGo for taps > 0 rows: the 3·Side sums of a row of the
// vertical pass in twelve vectors of eight, a broadcast weight per source
// row, rounded, clamped and packed to bytes, stored as 32 bytes at dst,
// dst+Side·Side and dst+2·Side·Side.
//
//go:noescape
func vdotAVX2(dst, mid *uint8, k *int32, taps int)

// preprocessConst holds the constants of preprocess_amd64.s: at 0 the
// scalars broadcast (128, the four chroma factors of color.YCbCrToRGB,
// 0xffffff, the rounding half of the resampling), at 32 the lanes of
// VPERMD that give each pixel of the first eight of sixteen its chroma
// term, at 64 those of the last eight, at 96 the order of VPERMD that
// undoes the lane interleaving of VPACKSSDW and VPACKUSWB, at 128 the
// VPSHUFB control that turns eight bytes y into the dwords y·0x10101.
var preprocessConst = [40]uint32{
	128, 91881, 1<<32 - 22554, 1<<32 - 46802, 116130, 0xffffff, 1 << (precision - 1), 0,
	0, 0, 1, 1, 2, 2, 3, 3,
	4, 4, 5, 5, 6, 6, 7, 7,
	0, 4, 1, 5, 2, 6, 3, 7,
	0x80000000, 0x80010101, 0x80020202, 0x80030303, 0x80040404, 0x80050505, 0x80060606, 0x80070707,
}
