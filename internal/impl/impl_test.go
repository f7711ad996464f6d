package impl

import (
	"slices"
	"testing"
)

func TestSelectAndForEach(t *testing.T) {
	a, b, c := true, true, false // c: not supported by "this CPU"
	Register("impltest", "a", &a)
	Register("impltest", "b", &b)
	Register("impltest", "c", &c)
	if !slices.Contains(Packages(), "impltest") {
		t.Fatalf("Packages() = %v", Packages())
	}
	names, supported := List("impltest")
	if !slices.Equal(names, []string{"a", "b", "c"}) || !slices.Equal(supported, []bool{true, true, false}) {
		t.Fatalf("List = %v %v", names, supported)
	}
	if Select("impltest", "c") || !a || !b || c {
		t.Fatal("selecting an unsupported implementation changed the flags")
	}
	if !Select("impltest", "b") || a || !b || c {
		t.Fatalf("after Select(b): a=%v b=%v c=%v", a, b, c)
	}
	Reset("impltest")
	if !a || !b || c {
		t.Fatalf("after Reset: a=%v b=%v c=%v", a, b, c)
	}
	var seen []string
	ForEach("impltest", func(name string) {
		seen = append(seen, name)
		want := [3]bool{name == "a", name == "b", false}
		if [3]bool{a, b, c} != want {
			t.Errorf("%s: flags %v, want %v", name, [3]bool{a, b, c}, want)
		}
	})
	if !slices.Equal(seen, []string{Generic, "a", "b"}) || !a || !b || c {
		t.Errorf("ForEach ran %v and left a=%v b=%v c=%v", seen, a, b, c)
	}
	for _, bad := range []string{Generic, "a b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", bad)
				}
			}()
			x := true
			Register("impltest", bad, &x)
		}()
	}
}
