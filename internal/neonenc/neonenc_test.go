package neonenc

import "testing"

// TestEncodings checks the encoders against words that go tool objdump
// decodes, in an arm64 binary, as the instructions named (Go operand order
// there: VFMLA V24.S[0], V26.S4, V0.S4 for the first FMLA below).
func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		name string
		got  uint32
		want uint32
	}{
		{"FMLA V0.4S, V1.4S, V2.S[0]", FMLAElem(0, 1, 2, 0), 0x4f821020},
		{"FMLA V0.4S, V26.4S, V24.S[0]", FMLAElem(0, 26, 24, 0), 0x4f981340},
		{"FMLA V3.4S, V26.4S, V24.S[1]", FMLAElem(3, 26, 24, 1), 0x4fb81343},
		{"FMLA V6.4S, V26.4S, V24.S[2]", FMLAElem(6, 26, 24, 2), 0x4f981b46},
		{"FMLA V9.4S, V26.4S, V24.S[3]", FMLAElem(9, 26, 24, 3), 0x4fb81b49},
		{"FMUL V0.4S, V0.4S, V29.S[0]", FMULElem(0, 0, 29, 0), 0x4f9d9000},
		{"FADD V2.4S, V2.4S, V8.4S", FADD(2, 2, 8), 0x4e28d442},
		{"FSUB V0.4S, V0.4S, V16.4S", FSUB(0, 0, 16), 0x4eb0d400},
		{"FMUL V0.4S, V17.4S, V0.4S", FMUL(0, 17, 0), 0x6e20de20},
		{"FDIV V8.4S, V25.4S, V8.4S", FDIV(8, 25, 8), 0x6e28ff28},
		{"FSQRT V8.4S, V2.4S", FSQRT(8, 2), 0x6ea1f848},
		{"FCMGT V4.4S, V4.4S, #0", FCMGTZ(4, 4), 0x4ea0c884},
		{"FCMLT V4.4S, V0.4S, #0", FCMLTZ(4, 0), 0x4ea0e804},
		{"FADD V0.2D, V1.2D, V2.2D", FADD2D(0, 1, 2), 0x4e62d420},
		{"FSUB V3.2D, V4.2D, V5.2D", FSUB2D(3, 4, 5), 0x4ee5d483},
		{"FMUL V6.2D, V7.2D, V8.2D", FMUL2D(6, 7, 8), 0x6e68dce6},
		{"FCVTL V9.2D, V10.2S", FCVTL(9, 10), 0x0e617949},
		{"FCVTL2 V11.2D, V12.4S", FCVTL2(11, 12), 0x4e61798b},
		{"FCVTL V20.2D, V1.2S", FCVTL(20, 1), 0x0e617834},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#08x, want %#08x", c.name, c.got, c.want)
		}
	}
}

func TestLines(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Op3("FADD", 2, 2, 8), "\tWORD $0x4e28d442 // FADD V8.S4, V2.S4, V2.S4 (V2 = V2 + V8)"},
		{Op2("FSQRT", 8, 2), "\tWORD $0x6ea1f848 // FSQRT V2.S4, V8.S4 (V8 = sqrt(V2))"},
		{Op2("FCMLTZ", 4, 0), "\tWORD $0x4ea0e804 // FCMLT $0, V0.S4, V4.S4 (V4 = V0 < 0)"},
		{OpElem("FMLA", 3, 26, 24, 1), "\tWORD $0x4fb81343 // FMLA V24.S[1], V26.S4, V3.S4 (V3 += V26 · V24[1])"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
