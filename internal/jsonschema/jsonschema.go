// Package jsonschema validates JSON values against the subset of JSON
// Schema that OpenAPI documents use for their objects: $ref, allOf, anyOf,
// type, properties, required, items and additionalProperties (false or a
// schema). The tests of programs that answer or write documents defined by
// a public schema (the Open Inference Protocol, Kubernetes objects) check
// their output with it against the committed part of that schema.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Schema is one schema of a document's definitions.
type Schema struct {
	Ref        string             `json:"$ref"`
	Type       string             `json:"type"`
	Properties map[string]*Schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *Schema            `json:"items"`
	AllOf      []*Schema          `json:"allOf"`
	AnyOf      []*Schema          `json:"anyOf"`
	Enum       []any              `json:"enum"`
	// Additional is additionalProperties: nil when absent, a schema, or
	// (NoAdditional) none allowed.
	Additional   *Schema `json:"-"`
	NoAdditional bool    `json:"-"`
}

// UnmarshalJSON reads additionalProperties as false or a schema.
func (s *Schema) UnmarshalJSON(b []byte) error {
	type plain Schema
	var aux struct {
		plain
		Additional json.RawMessage `json:"additionalProperties"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*s = Schema(aux.plain)
	switch a := bytes.TrimSpace(aux.Additional); {
	case len(a) == 0 || string(a) == "true":
	case string(a) == "false":
		s.NoAdditional = true
	default:
		s.Additional = new(Schema)
		return json.Unmarshal(a, s.Additional)
	}
	return nil
}

// Definitions are the named schemas of a document, found by $ref as
// "#/definitions/NAME" or "#/components/schemas/NAME".
type Definitions map[string]*Schema

// Parse reads the definitions of a schema document: its "definitions" or
// its "components.schemas".
func Parse(b []byte) (Definitions, error) {
	var doc struct {
		Definitions Definitions `json:"definitions"`
		Components  struct {
			Schemas Definitions `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.Definitions != nil {
		return doc.Definitions, nil
	}
	return doc.Components.Schemas, nil
}

// Validate checks the JSON text doc against the definition name and
// returns the first violation, naming its place in doc.
func (d Definitions) Validate(name string, doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	s, ok := d[name]
	if !ok {
		return fmt.Errorf("no definition %q", name)
	}
	return d.validate(s, v, "$")
}

func (d Definitions) validate(s *Schema, v any, at string) error {
	if s.Ref != "" {
		name := s.Ref[strings.LastIndexByte(s.Ref, '/')+1:]
		ref, ok := d[name]
		if !ok {
			return fmt.Errorf("%s: unknown $ref %q", at, s.Ref)
		}
		return d.validate(ref, v, at)
	}
	for _, all := range s.AllOf {
		if err := d.validate(all, v, at); err != nil {
			return err
		}
	}
	if s.AnyOf != nil {
		if !slices.ContainsFunc(s.AnyOf, func(alt *Schema) bool { return d.validate(alt, v, at) == nil }) {
			return fmt.Errorf("%s: %v matches none of anyOf", at, v)
		}
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, s.Enum)
	}
	switch s.Type {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", at, v)
		}
		for _, k := range s.Required {
			if _, ok := o[k]; !ok {
				return fmt.Errorf("%s: required %q is missing", at, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o)) {
			sub := s.Properties[k]
			if sub == nil {
				if s.NoAdditional {
					return fmt.Errorf("%s: property %q is not allowed", at, k)
				}
				sub = s.Additional
			}
			if sub != nil {
				if err := d.validate(sub, o[k], at+"."+k); err != nil {
					return err
				}
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", at, v)
		}
		if s.Items != nil {
			for i, x := range a {
				if err := d.validate(s.Items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want a string", at, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", at, v)
		}
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: %T, want a number", at, v)
		}
		if f, err := n.Float64(); s.Type == "integer" && (err != nil || f != math.Trunc(f)) {
			return fmt.Errorf("%s: %s, want an integer", at, n)
		}
	}
	return nil
}
