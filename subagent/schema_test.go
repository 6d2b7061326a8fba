package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// richSchema uses every accepted keyword.
const richSchema = `{
	"type": "object",
	"title": "Report",
	"description": "what the child found",
	"additionalProperties": false,
	"required": ["name", "count"],
	"default": {"name": "none", "count": 0},
	"examples": [{"name": "x", "count": 1}],
	"properties": {
		"name": {"type": "string", "description": "who"},
		"count": {"type": "integer", "default": 0, "examples": [1, 2]},
		"ratio": {"type": "number"},
		"done": {"type": "boolean", "const": true},
		"nothing": {"type": "null"},
		"kind": {"type": "string", "enum": ["a", "b"], "const": "a"},
		"level": {"type": "integer", "enum": [1, 2.0, 3], "const": 2},
		"any": {"enum": ["x", 1, true, null]},
		"tags": {"type": "array", "items": {"type": "string"}},
		"value": {"description": "text or number", "oneOf": [{"type": "string", "enum": ["s", "t"]}, {"type": "number"}]},
		"levels": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}},
		"odd/na~me": {"enum": [1, null]},
		"nested": {"type": "object", "properties": {"$ref": {"type": "string"}}, "required": ["$ref"]},
		"a b": {"type": "string"}
	}
}`

func TestCheckSchemaAccepts(t *testing.T) {
	for name, s := range map[string]string{
		"minimal":       `{"type": "object"}`,
		"every keyword": richSchema,
	} {
		t.Run(name, func(t *testing.T) {
			assert.NoError(t, CheckSchema(json.RawMessage(s)))
		})
	}
}

func TestCheckSchemaRejects(t *testing.T) {
	const prefix = "unsupported JSON schema: "
	const rootRule = `schema.type must be "object" (structured output is object-rooted)`
	prop := func(s string) string { return `{"type": "object", "properties": {"x": ` + s + `}}` }
	tests := []struct {
		name   string
		schema string
		want   string
	}{
		{"invalid JSON", `{"type":`, "schema is not valid JSON"},
		{"trailing data", `{"type":"object"} {}`, "schema is not valid JSON"},
		{"empty", ``, "schema is not valid JSON"},
		{"not an object", `[{"type":"object"}]`, "schema must be a JSON object"},
		{"boolean schema", `true`, "schema must be a JSON object"},
		{"no type", `{}`, rootRule},
		{"string root", `{"type": "string"}`, rootRule},
		{"type list at root", `{"type": ["object", "null"]}`, rootRule},
		{"oneOf root", `{"oneOf": [{"type": "object"}, {"type": "object"}]}`, rootRule},
		{"pattern", prop(`{"type": "string", "pattern": "^a"}`), "schema.properties.x.pattern is not a supported keyword"},
		{"every unsupported keyword, all collected in order", `{"type": "object",
			"$ref": "#", "$schema": "x", "$defs": {}, "allOf": [], "anyOf": [], "not": {}, "format": "email",
			"minimum": 1, "maxLength": 2, "minItems": 0, "maxProperties": 3, "patternProperties": {}, "if": {}}`,
			"schema.$defs is not a supported keyword; schema.$ref is not a supported keyword; " +
				"schema.$schema is not a supported keyword; schema.allOf is not a supported keyword; " +
				"schema.anyOf is not a supported keyword; schema.format is not a supported keyword; " +
				"schema.if is not a supported keyword; schema.maxLength is not a supported keyword; " +
				"schema.maxProperties is not a supported keyword; schema.minItems is not a supported keyword; " +
				"schema.minimum is not a supported keyword; schema.not is not a supported keyword; " +
				"schema.patternProperties is not a supported keyword"},
		{"root rule first, then the rest", `{"type": "array", "items": {"format": "date"}}`,
			rootRule + "; schema.items.format is not a supported keyword"},
		{"type list", prop(`{"type": ["string", "null"]}`), "schema.properties.x.type must be a single type name"},
		{"unknown type", prop(`{"type": "str"}`),
			`schema.properties.x.type "str" is not one of object, array, string, number, integer, boolean, null`},
		{"oneOf not an array", prop(`{"oneOf": {"type": "string"}}`), "schema.properties.x.oneOf must be an array of schemas"},
		{"oneOf one branch", prop(`{"oneOf": [{"type": "string"}]}`), "schema.properties.x.oneOf must have at least 2 branches"},
		{"oneOf beside type", prop(`{"type": "string", "oneOf": [{"type": "string"}, {"type": "number"}]}`),
			`schema.properties.x.oneOf must not be combined with "type"`},
		{"oneOf beside constraints", prop(`{"enum": ["a"], "oneOf": [{"type": "string"}, {"type": "number"}], "properties": {}}`),
			`schema.properties.x.oneOf must not be combined with "enum"; schema.properties.x.oneOf must not be combined with "properties"`},
		{"oneOf branches are checked", prop(`{"oneOf": [true, {"type": "number", "minimum": 0}]}`),
			"schema.properties.x.oneOf[0] must be a JSON object; schema.properties.x.oneOf[1].minimum is not a supported keyword"},
		{"properties not an object", `{"type": "object", "properties": []}`, "schema.properties must be an object of schemas"},
		{"property schema not an object", prop(`true`), "schema.properties.x must be a JSON object"},
		{"odd property names are quoted", `{"type": "object", "properties": {"a.b": {"format": "uri"}}}`,
			`schema.properties["a.b"].format is not a supported keyword`},
		{"required not an array", `{"type": "object", "required": "x"}`, "schema.required must be an array of property names"},
		{"required not a name", `{"type": "object", "required": [1]}`, "schema.required[0] must be a property name"},
		{"required not declared", `{"type": "object", "properties": {"x": {}}, "required": ["x", "y"]}`,
			`schema.required[1] "y" is not declared in schema.properties`},
		{"required without properties", prop(`{"type": "object", "required": ["z"]}`),
			`schema.properties.x.required[0] "z" is not declared in schema.properties.x.properties`},
		{"additionalProperties schema", `{"type": "object", "additionalProperties": {"type": "string"}}`,
			"schema.additionalProperties must be a boolean"},
		{"items tuple", prop(`{"type": "array", "items": [{"type": "string"}]}`),
			"schema.properties.x.items must be a single schema (tuple form is not supported)"},
		{"items not a schema", prop(`{"type": "array", "items": "string"}`), "schema.properties.x.items must be a JSON object"},
		{"items are checked", prop(`{"type": "array", "items": {"type": "string", "minLength": 1}}`),
			"schema.properties.x.items.minLength is not a supported keyword"},
		{"enum not an array", prop(`{"enum": "a"}`), "schema.properties.x.enum must be a non-empty array"},
		{"enum empty", prop(`{"enum": []}`), "schema.properties.x.enum must be a non-empty array"},
		{"enum non-scalar", prop(`{"enum": ["a", {"b": 1}, [1]]}`),
			"schema.properties.x.enum[1] must be a string, number, boolean or null; schema.properties.x.enum[2] must be a string, number, boolean or null"},
		{"enum type mismatch", prop(`{"type": "string", "enum": [1, "a", null]}`),
			`schema.properties.x.enum[0] does not match type "string"; schema.properties.x.enum[2] does not match type "string"`},
		{"enum integer mismatch", prop(`{"type": "integer", "enum": [1, 1.5, 1e400]}`),
			`schema.properties.x.enum[1] does not match type "integer"`},
		{"enum on an object type", prop(`{"type": "object", "enum": ["a"]}`), `schema.properties.x.enum[0] does not match type "object"`},
		{"const non-scalar", prop(`{"const": {"a": 1}}`), "schema.properties.x.const must be a string, number, boolean or null"},
		{"const type mismatch", prop(`{"type": "boolean", "const": "true"}`), `schema.properties.x.const does not match type "boolean"`},
		{"const number for integer", prop(`{"type": "integer", "const": 0.5}`), `schema.properties.x.const does not match type "integer"`},
		{"const outside enum", prop(`{"enum": ["a", "b"], "const": "c"}`),
			"schema.properties.x.const is not one of the values of schema.properties.x.enum"},
		{"const number outside enum", prop(`{"enum": [1, 2], "const": 3}`),
			"schema.properties.x.const is not one of the values of schema.properties.x.enum"},
		{"const string is not the number", prop(`{"enum": [1], "const": "1"}`),
			"schema.properties.x.const is not one of the values of schema.properties.x.enum"},
		{"description not a string", `{"type": "object", "description": 1}`, "schema.description must be a string"},
		{"title not a string", prop(`{"title": ["t"]}`), "schema.properties.x.title must be a string"},
		{"examples not an array", `{"type": "object", "examples": {"a": 1}}`, "schema.examples must be an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSchema(json.RawMessage(tt.schema))
			require.EqualError(t, err, prefix+tt.want)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, RuleUnsupportedSchema, ve.Rule)
		})
	}
}

func TestCompileSchemaRejectsOutsideTheSubset(t *testing.T) {
	_, err := CompileSchema(json.RawMessage(`{"type": "object", "not": {}}`))
	require.EqualError(t, err, "unsupported JSON schema: schema.not is not a supported keyword")
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
}

func TestValidateValue(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(richSchema))
	require.NoError(t, err)
	tests := []struct {
		name  string
		value string
		want  string // "" = valid
	}{
		{"valid", `{"name": "x", "count": 2, "kind": "a", "level": 2.0, "tags": ["t"], "value": 3, "nested": {"$ref": "r"}, "levels": [2], "odd/na~me": null}`, ""},
		{"not JSON", `{"name":`, "value is not valid JSON"},
		{"not an object", `[]`, "at root: expected object, but got array"},
		{"missing required", `{}`, "at root: missing properties: 'name', 'count'"},
		{"wrong type", `{"name": "x", "count": "2"}`, "at /count: expected integer, but got string"},
		{"not an integer", `{"name": "x", "count": 1.5}`, "at /count: expected integer, but got number"},
		{"additional property", `{"name": "x", "count": 1, "extra": true}`, "at root: additionalProperties 'extra' not allowed"},
		{"enum", `{"name": "x", "count": 1, "any": 2}`, `at /any: value must be one of "x", 1, true, null`},
		{"enum in items", `{"name": "x", "count": 1, "levels": [1, 3]}`, `at /levels/1: value must be one of 1, 2`},
		{"enum under an escaped name", `{"name": "x", "count": 1, "odd/na~me": 2}`, `at /odd~1na~0me: value must be one of 1, null`},
		{"const beside enum", `{"name": "x", "count": 1, "level": 3}`, `at /level: value must be 2`},
		{"const", `{"name": "x", "count": 1, "done": false}`, "at /done: value must be true"},
		{"item", `{"name": "x", "count": 1, "tags": ["a", 2]}`, "at /tags/1: expected string, but got number"},
		{"oneOf", `{"name": "x", "count": 1, "value": false}`,
			"at /value: expected string, but got boolean; at /value: expected number, but got boolean"},
		{"enum in a oneOf branch", `{"name": "x", "count": 1, "value": "u"}`,
			`at /value: value must be one of "s", "t"; at /value: expected number, but got string`},
		{"several problems, sorted by location", `{"name": 1, "count": 1, "tags": [1], "done": "no"}`,
			"at /done: expected boolean, but got string; at /name: expected string, but got number; at /tags/0: expected string, but got number"},
		{"at most five problems", `{"name": 1, "count": "c", "ratio": "r", "done": 1, "nothing": 1, "tags": [1, 2]}`,
			"at /count: expected integer, but got string; at /done: expected boolean, but got number; " +
				"at /name: expected string, but got number; at /nothing: expected null, but got number; " +
				"at /ratio: expected number, but got string; and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateValue(s, json.RawMessage(tt.value))
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.want)
		})
	}
}
