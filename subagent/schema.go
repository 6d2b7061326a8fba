package subagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// schemaTypes are the accepted values of `type`, in the order messages list them.
var schemaTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// annotations may sit beside any keyword, `oneOf` included.
var annotations = []string{"default", "description", "examples", "title"}

// CheckSchema checks that raw is an object-rooted JSON schema within the accepted subset
// (contract R-45):
//
//   - `type`: a single string among object, array, string, number, integer, boolean, null;
//     at the root it must be "object".
//   - `oneOf`: an array of at least 2 schemas, beside annotations only (no `type`, no
//     constraints).
//   - `properties` (an object of schemas), `required` (names declared in `properties`),
//     `additionalProperties` (a boolean), `items` (a single schema).
//   - `enum` (a non-empty array) and `const`: scalars that match `type` when it is set; a
//     `const` beside an `enum` must be one of its values.
//   - annotations: `description` and `title` (strings), `default` (any JSON value),
//     `examples` (an array of JSON values).
//
// Any other keyword is rejected. All violations are collected, named by their path from
// `schema` (e.g. `schema.properties.x.pattern is not a supported keyword`), with an
// object's keywords visited in sorted order, into one *ValidationError with Rule
// RuleUnsupportedSchema and the message `unsupported JSON schema: <v1>; <v2>…`.
func CheckSchema(raw json.RawMessage) error {
	var c schemaChecker
	if doc, err := decodeJSON(raw); err != nil {
		c.add("schema is not valid JSON")
	} else {
		c.root(doc)
	}
	if len(c.violations) == 0 {
		return nil
	}
	return Rejectf(RuleUnsupportedSchema, "unsupported JSON schema: %s", strings.Join(c.violations, "; "))
}

var errNotJSON = errors.New("not valid JSON")

// decodeJSON decodes exactly one JSON value, keeping numbers exact (as json.Number).
func decodeJSON(raw []byte) (any, error) {
	if !json.Valid(raw) {
		return nil, errNotJSON
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

type schemaChecker struct {
	violations []string
}

func (c *schemaChecker) add(format string, a ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, a...))
}

func (c *schemaChecker) root(doc any) {
	obj, ok := doc.(map[string]any)
	if !ok {
		c.add("schema must be a JSON object")
		return
	}
	if obj["type"] != "object" {
		c.add(`schema.type must be "object" (structured output is object-rooted)`)
	}
	c.keywords("schema", obj, true)
}

func (c *schemaChecker) node(path string, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.add("%s must be a JSON object", path)
		return
	}
	c.keywords(path, obj, false)
}

func (c *schemaChecker) keywords(path string, obj map[string]any, root bool) {
	typ, _ := obj["type"].(string)
	if !slices.Contains(schemaTypes, typ) {
		typ = "" // absent or invalid: nothing to match enum/const against
	}
	for _, k := range sortedKeys(obj) {
		p, v := childPath(path, k), obj[k]
		switch k {
		case "type":
			if !root { // the root rule already covers the root's type
				c.checkType(p, v)
			}
		case "oneOf":
			c.checkOneOf(p, obj, v)
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				c.add("%s must be an object of schemas", p)
				continue
			}
			for _, name := range sortedKeys(props) {
				c.node(childPath(p, name), props[name])
			}
		case "required":
			c.checkRequired(path, p, obj, v)
		case "additionalProperties":
			if _, ok := v.(bool); !ok {
				c.add("%s must be a boolean", p)
			}
		case "items":
			if _, ok := v.([]any); ok {
				c.add("%s must be a single schema (tuple form is not supported)", p)
				continue
			}
			c.node(p, v)
		case "enum":
			c.checkEnum(p, typ, v)
		case "const":
			c.checkConst(path, p, typ, obj, v)
		case "description", "title":
			if _, ok := v.(string); !ok {
				c.add("%s must be a string", p)
			}
		case "default":
		case "examples":
			if _, ok := v.([]any); !ok {
				c.add("%s must be an array", p)
			}
		default:
			c.add("%s is not a supported keyword", p)
		}
	}
}

func (c *schemaChecker) checkType(p string, v any) {
	s, ok := v.(string)
	switch {
	case !ok:
		c.add("%s must be a single type name", p)
	case !slices.Contains(schemaTypes, s):
		c.add("%s %q is not one of %s", p, s, strings.Join(schemaTypes, ", "))
	}
}

func (c *schemaChecker) checkOneOf(p string, obj map[string]any, v any) {
	branches, ok := v.([]any)
	if !ok {
		c.add("%s must be an array of schemas", p)
		return
	}
	if len(branches) < 2 {
		c.add("%s must have at least 2 branches", p)
	}
	for _, k := range sortedKeys(obj) {
		if k != "oneOf" && !slices.Contains(annotations, k) {
			c.add("%s must not be combined with %q", p, k)
		}
	}
	for i, b := range branches {
		c.node(indexPath(p, i), b)
	}
}

func (c *schemaChecker) checkRequired(path, p string, obj map[string]any, v any) {
	names, ok := v.([]any)
	if !ok {
		c.add("%s must be an array of property names", p)
		return
	}
	props, _ := obj["properties"].(map[string]any)
	for i, n := range names {
		name, ok := n.(string)
		if !ok {
			c.add("%s must be a property name", indexPath(p, i))
			continue
		}
		if _, declared := props[name]; !declared {
			c.add("%s %q is not declared in %s", indexPath(p, i), name, childPath(path, "properties"))
		}
	}
}

func (c *schemaChecker) checkEnum(p, typ string, v any) {
	values, ok := v.([]any)
	if !ok || len(values) == 0 {
		c.add("%s must be a non-empty array", p)
		return
	}
	for i, e := range values {
		c.checkScalar(indexPath(p, i), typ, e)
	}
}

func (c *schemaChecker) checkConst(path, p, typ string, obj map[string]any, v any) {
	if !c.checkScalar(p, typ, v) {
		return
	}
	values, ok := obj["enum"].([]any)
	if !ok {
		return
	}
	if !slices.ContainsFunc(values, func(e any) bool { return scalarEqual(e, v) }) {
		c.add("%s is not one of the values of %s", p, childPath(path, "enum"))
	}
}

// checkScalar reports whether v is a scalar matching typ ("" matches every scalar).
func (c *schemaChecker) checkScalar(p, typ string, v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		c.add("%s must be a string, number, boolean or null", p)
		return false
	}
	if typ != "" && !scalarHasType(v, typ) {
		c.add("%s does not match type %q", p, typ)
		return false
	}
	return true
}

func scalarHasType(v any, typ string) bool {
	switch v := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case nil:
		return typ == "null"
	case json.Number:
		if typ == "integer" {
			f, ok := bigNumber(v)
			return ok && f.IsInt()
		}
		return typ == "number"
	}
	return false
}

func scalarEqual(a, b any) bool {
	na, aNum := a.(json.Number)
	nb, bNum := b.(json.Number)
	if aNum && bNum {
		fa, okA := bigNumber(na)
		fb, okB := bigNumber(nb)
		return okA && okB && fa.Cmp(fb) == 0
	}
	if aNum || bNum {
		return false
	}
	switch a.(type) {
	case string, bool, nil:
		return a == b
	}
	return false
}

// bigNumber parses a JSON number without expanding its exponent (1e999999999 stays cheap).
func bigNumber(n json.Number) (*big.Float, bool) {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	return f, err == nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	//workflowcheck:ignore the keys are sorted before use
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// childPath appends a key: `.key` when it reads as an identifier, else `["key"]`.
func childPath(path, key string) string {
	if identifier.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// schemaURL names the compiled schema; it is never fetched.
const schemaURL = "urn:subflow:output-schema"

// CompileSchema checks raw with CheckSchema and compiles it for ValidateValue. A schema
// outside the subset returns CheckSchema's *ValidationError.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if err := CheckSchema(raw); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource(schemaURL, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("subagent: compile output schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("subagent: compile output schema: %w", err)
	}
	return s, nil
}

// maxValueProblems bounds ValidateValue's message: a model needs the first few problems,
// not a page of them.
const maxValueProblems = 5

// ValidateValue validates the JSON value against a schema from CompileSchema. The error's
// message is meant for a model: each problem as `at <JSON pointer>: <what is wrong>`
// (`at root` for the value itself), sorted by location, joined by "; ", at most
// maxValueProblems of them.
func ValidateValue(schema *jsonschema.Schema, value json.RawMessage) error {
	v, err := decodeJSON(value)
	if err != nil {
		return errors.New("value is not valid JSON")
	}
	err = schema.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The leaves say what is wrong; the inner nodes only say which keyword led there. The
	// validator walks properties in map order, so sort for a stable message.
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, cause := range e.Causes {
			walk(cause)
		}
	}
	walk(ve)
	slices.SortStableFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		return strings.Compare(a.InstanceLocation, b.InstanceLocation)
	})
	var problems []string
	for _, e := range leaves {
		at := e.InstanceLocation
		if at == "" {
			at = "root"
		}
		if p := "at " + at + ": " + leafMessage(schema, e); !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
	}
	if n := len(problems); n > maxValueProblems {
		problems = append(problems[:maxValueProblems], fmt.Sprintf("and %d more", n-maxValueProblems))
	}
	return errors.New(strings.Join(problems, "; "))
}

// leafMessage returns e's message, rewriting enum and const failures: the validator prints
// the schema's numbers as quoted strings and null as <nil>, which would mislead a model.
func leafMessage(root *jsonschema.Schema, e *jsonschema.ValidationError) string {
	_, loc, _ := strings.Cut(e.AbsoluteKeywordLocation, "#")
	i := strings.LastIndexByte(loc, '/')
	if i < 0 {
		return e.Message
	}
	keyword := loc[i+1:]
	if keyword != "enum" && keyword != "const" {
		return e.Message
	}
	s := schemaAt(root, loc[:i])
	if s == nil {
		return e.Message
	}
	values := s.Enum
	if keyword == "const" {
		values = s.Constant
	}
	rendered := make([]string, 0, len(values))
	for _, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return e.Message
		}
		rendered = append(rendered, string(raw))
	}
	if keyword == "const" {
		return "value must be " + strings.Join(rendered, ", ")
	}
	return "value must be one of " + strings.Join(rendered, ", ")
}

// schemaAt follows a JSON pointer through the keywords of the accepted subset that hold
// schemas; it returns nil for any other pointer.
func schemaAt(s *jsonschema.Schema, pointer string) *jsonschema.Schema {
	if pointer == "" {
		return s
	}
	tokens := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for len(tokens) > 0 && s != nil {
		switch tokens[0] {
		case "items":
			s, tokens = s.Items2020, tokens[1:]
			continue
		case "properties", "oneOf":
		default:
			return nil
		}
		if len(tokens) < 2 {
			return nil
		}
		token, err := url.PathUnescape(tokens[1])
		if err != nil {
			return nil
		}
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		if tokens[0] == "properties" {
			s = s.Properties[token]
		} else if i, err := strconv.Atoi(token); err == nil && i >= 0 && i < len(s.OneOf) {
			s = s.OneOf[i]
		} else {
			return nil
		}
		tokens = tokens[2:]
	}
	return s
}
