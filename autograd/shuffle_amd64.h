// Shuffles of the AVX2 kernels of pool_amd64.s; autograd/conv keeps a
// copy for its winograd_amd64.s (an assembly file includes headers of its
// own package's folder only). Change both.

// DEINTERLEAVE splits the 16 floats lo:hi into their even elements (into
// ev) and odd elements (into od), in order.
#define DEINTERLEAVE(lo, hi, ev, od) \
	VSHUFPS $0x88, hi, lo, ev; \
	VSHUFPS $0xDD, hi, lo, od; \
	VPERMPD $0xD8, ev, ev;     \
	VPERMPD $0xD8, od, od

// INTERLEAVE writes x0 y0 x1 y1 … x7 y7 into lo (first 8) and hi.
#define INTERLEAVE(x, y, lo, hi, t) \
	VUNPCKLPS  y, x, t;      \
	VUNPCKHPS  y, x, hi;     \
	VPERM2F128 $0x20, hi, t, lo; \
	VPERM2F128 $0x31, hi, t, hi
