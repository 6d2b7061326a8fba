package docs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/subflow-dev/subflow/workflows"
)

// messages are the JSON messages of json.md: each schema file of json/ that a caller sends
// or reads whole, and the Go type the workers encode and decode it as.
var messages = []struct {
	file string
	typ  reflect.Type
}{
	{"start-input.schema.json", reflect.TypeFor[workflows.StartInput]()},
	{"published.schema.json", reflect.TypeFor[workflows.Published]()},
	{"status.schema.json", reflect.TypeFor[workflows.Status]()},
	{"outcome.schema.json", reflect.TypeFor[workflows.Outcome]()},
	{"batch-input.schema.json", reflect.TypeFor[workflows.BatchInput]()},
	{"batch-task-page.schema.json", reflect.TypeFor[workflows.TaskPage]()},
	{"batch-summary.schema.json", reflect.TypeFor[workflows.BatchSummary]()},
	{"batch-result.schema.json", reflect.TypeFor[workflows.BatchResult]()},
}

// TestJSONSchemasMatchGoTypes walks each schema beside its Go type: every JSON field of the
// Go type (and of the types it holds) must be a property of the schema with a matching
// JSON type, and every property a field. A field added to or renamed in the Go types
// without the schema fails here.
func TestJSONSchemasMatchGoTypes(t *testing.T) {
	files := readSchemaFiles(t)
	for _, m := range messages {
		w := schemaWalker{t: t, files: files}
		w.check(m.file, m.file, files[m.file], m.typ)
	}
}

// TestJSONSchemasValidateRecordedPayloads validates the payloads of the recorded histories
// of real runs (workflows/testdata): inputs, published results, outcomes, Canceled details,
// batch inputs and summaries, and the children's inputs and outcomes a batch or a nested
// run records. A rejected published update must carry one of the documented rules.
func TestJSONSchemasValidateRecordedPayloads(t *testing.T) {
	schemas := compileSchemas(t)
	paths, err := filepath.Glob("../workflows/testdata/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	validated := map[string]int{}
	for _, path := range paths {
		for _, p := range historyPayloads(t, path) {
			if p.schema == "" {
				continue
			}
			if err := schemas[p.schema].Validate(p.value); err != nil {
				t.Errorf("%s event %s (%s): %v\npayload: %s", filepath.Base(path), p.event, p.schema, err, p.raw)
			}
			validated[p.schema]++
		}
	}
	for _, file := range []string{"start-input.schema.json", "published.schema.json", "outcome.schema.json", "batch-input.schema.json", "batch-summary.schema.json"} {
		if validated[file] == 0 {
			t.Errorf("no recorded payload validated against %s", file)
		}
	}
	t.Logf("validated: %v", validated)
}

// TestJSONSchemasRejectWrongTypes takes real payloads and breaks one field's type each: the
// schema must reject every one.
func TestJSONSchemasRejectWrongTypes(t *testing.T) {
	schemas := compileSchemas(t)
	first := map[string]json.RawMessage{}
	paths, _ := filepath.Glob("../workflows/testdata/*.json")
	for _, path := range paths {
		for _, p := range historyPayloads(t, path) {
			if _, ok := first[p.schema]; !ok && p.schema != "" {
				first[p.schema] = p.raw
			}
		}
	}
	cases := []struct {
		schema, field string
		value         any
	}{
		{"start-input.schema.json", "provider", 7},
		{"start-input.schema.json", "request.prompt", "look around"},
		{"start-input.schema.json", "request.maxDepth", "2"},
		{"start-input.schema.json", "timeout", "ten minutes"},
		{"start-input.schema.json", "timeout", true},
		{"start-input.schema.json", "tiemout", "10m"}, // unknown fields are typos
		{"published.schema.json", "depth", "1"},
		{"outcome.schema.json", "result.stopReason", "done"},
		{"outcome.schema.json", "result.output", "spawn answer"},
		{"batch-input.schema.json", "total", "2"},
		{"batch-input.schema.json", "tasks", map[string]any{"task": "one"}},
		{"batch-summary.schema.json", "done", true},
	}
	for _, c := range cases {
		raw, ok := first[c.schema]
		if !ok {
			t.Fatalf("no recorded payload for %s", c.schema)
		}
		v := decodeJSON(t, raw).(map[string]any)
		set(v, strings.Split(c.field, "."), c.value)
		if err := schemas[c.schema].Validate(v); err == nil {
			t.Errorf("%s accepts %s = %#v", c.schema, c.field, c.value)
		}
	}
	// And what a person writes is accepted, and decodes to the same StartInput as Go's form.
	v := decodeJSON(t, first["start-input.schema.json"]).(map[string]any)
	v["timeout"] = "10m"
	if err := schemas["start-input.schema.json"].Validate(v); err != nil {
		t.Errorf("timeout \"10m\": %v", err)
	}
	data, _ := json.Marshal(v)
	var in workflows.StartInput
	if err := json.Unmarshal(data, &in); err != nil || in.Timeout != workflows.Duration(10*time.Minute) {
		t.Errorf("timeout \"10m\" decodes to %v, %v", in.Timeout, err)
	}
}

// TestJSONDocumented checks json.md against the schemas and the Go names: it shows every
// schema file and every property of each (a schema change without a doc change fails), and
// names every message, rejection rule and search attribute.
func TestJSONDocumented(t *testing.T) {
	doc, err := os.ReadFile("json.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	files := readSchemaFiles(t)
	for file, s := range files {
		if !strings.Contains(text, "(json/"+file+")") {
			t.Errorf("json.md: no link to json/%s", file)
		}
		for _, name := range propertyNames(s) {
			if !strings.Contains(text, "`"+name+"`") && !strings.Contains(text, `"`+name+`":`) {
				t.Errorf("json.md: property %q of %s is not shown", name, file)
			}
		}
	}
	names := []string{
		workflows.WorkflowName, workflows.BatchWorkflowName, workflows.TaskQueue,
		workflows.UpdatePublished, workflows.QueryStatus,
		workflows.UpdateAddTasks, workflows.UpdatePause, workflows.UpdateResume, workflows.UpdateResize,
		workflows.UpdateCancel, workflows.QueryProgress, workflows.MemoBatchIndex,
	}
	names = append(names, workflows.RejectionRules()...)
	for _, key := range workflows.SearchAttributes {
		names = append(names, key.GetName())
	}
	for _, name := range names {
		if !strings.Contains(text, "`"+name+"`") {
			t.Errorf("json.md does not name `%s`", name)
		}
	}
}

// readSchemaFiles returns every file of json/ by name, decoded.
func readSchemaFiles(t *testing.T) map[string]map[string]any {
	t.Helper()
	paths, err := filepath.Glob("json/*.schema.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	files := map[string]map[string]any{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		files[filepath.Base(path)] = s
	}
	return files
}

// compileSchemas compiles every message's schema, as a validator of another language would.
func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	schemas := map[string]*jsonschema.Schema{}
	for _, m := range messages {
		s, err := c.Compile(filepath.Join("json", m.file))
		if err != nil {
			t.Fatalf("compile %s: %v", m.file, err)
		}
		schemas[m.file] = s
	}
	return schemas
}

// payload is one JSON payload of a recorded history, and the schema it must match ("" for
// one json.md does not cover, such as an activity's input).
type payload struct {
	event  string
	schema string
	raw    json.RawMessage
	value  any
}

// historyPayloads returns the payloads of the workflow-level events of the history at path:
// what a caller of the workflow sends and reads, and its children's.
func historyPayloads(t *testing.T, path string) []payload {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	type attrs struct {
		WorkflowType struct {
			Name string `json:"name"`
		} `json:"workflowType"`
		Input, Result, Details *payloads
		AcceptedRequest        struct {
			Input struct {
				Name string    `json:"name"`
				Args *payloads `json:"args"`
			} `json:"input"`
		} `json:"acceptedRequest"`
		AcceptedEventID string `json:"acceptedEventId"`
		Outcome         struct {
			Success *payloads       `json:"success"`
			Failure json.RawMessage `json:"failure"`
		} `json:"outcome"`
	}
	// results and details name their schema by the workflow type; update results by name.
	resultOf := map[string]string{workflows.WorkflowName: "outcome.schema.json", workflows.BatchWorkflowName: "batch-summary.schema.json"}
	inputOf := map[string]string{workflows.WorkflowName: "start-input.schema.json", workflows.BatchWorkflowName: "batch-input.schema.json"}
	updateResult := map[string]string{workflows.UpdatePublished: "published.schema.json"}
	for _, u := range []string{workflows.UpdateAddTasks, workflows.UpdatePause, workflows.UpdateResume, workflows.UpdateResize, workflows.UpdateCancel} {
		updateResult[u] = "batch-summary.schema.json"
	}
	var own string
	updates := map[string]string{}
	var out []payload
	add := func(event, schema string, ps *payloads) {
		for _, raw := range ps.decode(t) {
			out = append(out, payload{event: event, schema: schema, raw: raw, value: decodeJSON(t, raw)})
		}
	}
	for _, e := range h.Events {
		var typ, id string
		_ = json.Unmarshal(e["eventType"], &typ)
		_ = json.Unmarshal(e["eventId"], &id)
		typ = strings.TrimPrefix(typ, "EVENT_TYPE_")
		var a attrs
		for k, v := range e {
			if strings.HasSuffix(k, "EventAttributes") {
				if err := json.Unmarshal(v, &a); err != nil {
					t.Fatalf("%s event %s: %v", path, id, err)
				}
			}
		}
		event := id + " " + typ
		switch typ {
		case "WORKFLOW_EXECUTION_STARTED":
			own = a.WorkflowType.Name
			add(event, inputOf[own], a.Input)
		case "WORKFLOW_EXECUTION_COMPLETED":
			add(event, resultOf[own], a.Result)
		case "WORKFLOW_EXECUTION_CANCELED":
			add(event, resultOf[own], a.Details)
		case "START_CHILD_WORKFLOW_EXECUTION_INITIATED":
			add(event, inputOf[a.WorkflowType.Name], a.Input)
		case "CHILD_WORKFLOW_EXECUTION_COMPLETED":
			add(event, resultOf[a.WorkflowType.Name], a.Result)
		case "CHILD_WORKFLOW_EXECUTION_CANCELED":
			add(event, resultOf[a.WorkflowType.Name], a.Details)
		case "WORKFLOW_EXECUTION_UPDATE_ACCEPTED":
			name := a.AcceptedRequest.Input.Name
			updates[id] = name
			if name == workflows.UpdateAddTasks {
				add(event, "batch-task-page.schema.json", a.AcceptedRequest.Input.Args)
			}
		case "WORKFLOW_EXECUTION_UPDATE_COMPLETED":
			add(event, updateResult[updates[a.AcceptedEventID]], a.Outcome.Success)
			if len(a.Outcome.Failure) > 0 {
				checkRejection(t, path+" event "+event, a.Outcome.Failure)
			}
		}
	}
	return out
}

// checkRejection checks that a failed update carries an ApplicationError whose type is a
// documented rule.
func checkRejection(t *testing.T, at string, failure json.RawMessage) {
	var f struct {
		Message string `json:"message"`
		Info    *struct {
			Type string `json:"type"`
		} `json:"applicationFailureInfo"`
	}
	if err := json.Unmarshal(failure, &f); err != nil || f.Info == nil {
		t.Errorf("%s: update failure is no ApplicationError: %s", at, failure)
		return
	}
	if !slices.Contains(workflows.RejectionRules(), f.Info.Type) {
		t.Errorf("%s: update failure type %q is no rejection rule (%s)", at, f.Info.Type, f.Message)
	}
}

// payloads is a Payloads message as `temporal workflow show --output json` writes it.
type payloads struct {
	Payloads []struct {
		Metadata map[string]string `json:"metadata"`
		Data     string            `json:"data"`
	} `json:"payloads"`
}

// decode returns the json/plain payloads' JSON.
func (ps *payloads) decode(t *testing.T) []json.RawMessage {
	if ps == nil {
		return nil
	}
	var out []json.RawMessage
	for _, p := range ps.Payloads {
		enc, _ := base64.StdEncoding.DecodeString(p.Metadata["encoding"])
		if string(enc) != "json/plain" {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			t.Fatalf("payload data: %v", err)
		}
		out = append(out, data)
	}
	return out
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// set sets the field at path of v, creating objects on the way.
func set(v map[string]any, path []string, value any) {
	for _, k := range path[:len(path)-1] {
		next, ok := v[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			v[k] = next
		}
		v = next
	}
	v[path[len(path)-1]] = value
}

// propertyNames returns every property name declared anywhere in schema s.
func propertyNames(s any) []string {
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					names = append(names, name)
					walk(p)
				}
			}
			for k, sub := range v {
				if k != "properties" {
					walk(sub)
				}
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(s)
	slices.Sort(names)
	return slices.Compact(names)
}

// schemaWalker checks a schema against a Go type; files are the schema files by name, for
// resolving references.
type schemaWalker struct {
	t     *testing.T
	files map[string]map[string]any
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	durationType   = reflect.TypeFor[workflows.Duration]()
	timeType       = reflect.TypeFor[time.Time]()
	taskType       = reflect.TypeFor[workflows.Task]()
)

// resolve follows s's $ref, if any, relative to file; it returns the file the schema it
// lands on is in.
func (w *schemaWalker) resolve(file string, s map[string]any) (string, map[string]any) {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return file, s
		}
		target, pointer, _ := strings.Cut(ref, "#")
		if target != "" {
			file = target
		}
		var v any = w.files[file]
		if v == nil {
			w.t.Fatalf("%s: $ref %q names no file of json/", file, ref)
		}
		for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
			if part != "" {
				v = v.(map[string]any)[part]
			}
		}
		next, ok := v.(map[string]any)
		if !ok {
			w.t.Fatalf("%s: $ref %q resolves to nothing", file, ref)
		}
		s = next
	}
}

func (w *schemaWalker) check(at, file string, s map[string]any, typ reflect.Type) {
	file, s = w.resolve(file, s)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ {
	case rawMessageType:
		return // any JSON value
	case durationType:
		var kinds []string
		for _, branch := range s["anyOf"].([]any) {
			kinds = append(kinds, jsonTypes(branch.(map[string]any))...)
		}
		if !slices.Contains(kinds, "string") || !slices.Contains(kinds, "integer") {
			w.t.Errorf("%s: a duration must accept a string and an integer, the schema accepts %v", at, kinds)
		}
		return
	case timeType:
		w.want(at, s, "string")
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		w.want(at, s, "object")
		props, _ := s["properties"].(map[string]any)
		fields := jsonFields(typ)
		for name, f := range fields {
			p, ok := props[name].(map[string]any)
			if !ok {
				w.t.Errorf("%s: Go field %s.%s (JSON %q) is not in the schema", at, typ.Name(), f.Name, name)
				continue
			}
			w.check(at+"."+name, file, p, f.Type)
		}
		for name := range props {
			if _, ok := fields[name]; ok {
				continue
			}
			if typ == taskType && acceptedTaskAlias(name, props[name].(map[string]any)) {
				continue
			}
			w.t.Errorf("%s: schema property %q is no JSON field of Go type %s", at, name, typ.Name())
		}
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := props[r.(string)]; !ok {
				w.t.Errorf("%s: required %q is not a property", at, r)
			}
		}
	case reflect.Slice:
		w.want(at, s, "array")
		if items, ok := s["items"].(map[string]any); ok {
			w.check(at+"[]", file, items, typ.Elem())
		} else {
			w.t.Errorf("%s: an array without items", at)
		}
	case reflect.Map:
		w.want(at, s, "object")
		if values, ok := s["additionalProperties"].(map[string]any); ok {
			w.check(at+"{}", file, values, typ.Elem())
		} else {
			w.t.Errorf("%s: a map without additionalProperties", at)
		}
	case reflect.String:
		w.want(at, s, "string")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.want(at, s, "integer")
	case reflect.Bool:
		w.want(at, s, "boolean")
	case reflect.Float32, reflect.Float64:
		w.want(at, s, "number")
	default:
		w.t.Errorf("%s: Go type %s has no JSON schema counterpart in this test", at, typ)
	}
}

// want checks that schema s admits exactly the JSON type kind (integer also admitting
// number is not allowed: Go decodes no fraction into an int).
func (w *schemaWalker) want(at string, s map[string]any, kind string) {
	kinds := jsonTypes(s)
	if len(kinds) == 0 || !slices.Contains(kinds, kind) || slices.ContainsFunc(kinds, func(k string) bool { return k != kind && k != "null" }) {
		w.t.Errorf("%s: the Go type is a JSON %s, the schema says %v", at, kind, kinds)
	}
}

// jsonTypes returns the JSON types schema s admits by its type keyword, or by its enum.
func jsonTypes(s map[string]any) []string {
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var kinds []string
		for _, k := range v {
			kinds = append(kinds, k.(string))
		}
		return kinds
	}
	var kinds []string
	for _, e := range s["enum"].([]any) {
		kind := "string"
		if _, ok := e.(string); !ok {
			kind = fmt.Sprintf("%T", e)
		}
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	return kinds
}

// jsonFields returns the fields of struct typ by their JSON names.
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f
	}
	return fields
}

// aliasRef matches the description of an alias property of Task.
var aliasRef = regexp.MustCompile("^Alias of ([a-zA-Z]+)\\.$")

// acceptedTaskAlias reports whether property name of the Task schema is an alias a batch
// line may use: a task line giving it parses, and it says which field it is an alias of.
func acceptedTaskAlias(name string, p map[string]any) bool {
	desc, _ := p["description"].(string)
	if !aliasRef.MatchString(desc) {
		return false
	}
	value := map[string]string{"string": `"x"`, "integer": `1`, "object": `{"type": "object"}`}[jsonTypes(p)[0]]
	_, _, err := workflows.ParseTaskLine([]byte(fmt.Sprintf(`{"task": "x", %q: %s}`, name, value)))
	return err == nil
}
