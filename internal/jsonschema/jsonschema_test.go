package jsonschema

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	d, err := Parse([]byte(`{"definitions": {
	  "obj": {"type": "object", "required": ["a"], "additionalProperties": false,
	    "properties": {"a": {"type": "integer"}, "b": {"allOf": [{"$ref": "#/definitions/list"}]}, "c": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}}},
	  "list": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
	  "free": {"type": "object", "additionalProperties": {"type": "number"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ def, doc, want string }{
		{"obj", `{"a": 1, "b": ["x"], "c": true}`, ""},
		{"obj", `{"b": []}`, `required "a"`},
		{"obj", `{"a": 1.5}`, "want an integer"},
		{"obj", `{"a": 1, "z": 0}`, `property "z" is not allowed`},
		{"obj", `{"a": 1, "b": ["q"]}`, "is not one of"},
		{"obj", `{"a": 1, "c": 3}`, "none of anyOf"},
		{"free", `{"p": 1, "q": "s"}`, "want a number"},
		{"list", `{}`, "want an array"},
	} {
		err := d.Validate(c.def, []byte(c.doc))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %s: %v, want %q", c.def, c.doc, err, c.want)
		}
	}
}
