package model_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
)

// ExampleScripted streams a scripted answer in equal chunks: the model names a script file,
// resolved against the session's working directory, whose responses are answered in order,
// per session.
func ExampleScripted() {
	dir, err := os.MkdirTemp("", "model-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	script := `{"responses": [{"text": "one two three", "chunks": 3}]}`
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644); err != nil {
		log.Fatal(err)
	}
	models := &model.Registry{}
	models.Register(model.ProviderScripted, model.NewScripted())
	m, err := models.Lookup(model.ProviderScripted)
	if err != nil {
		log.Fatal(err)
	}
	var deltas []string
	resp, err := m.Stream(context.Background(), model.Request{
		SessionID: "s1", Cwd: dir, Model: "script.json",
		Messages: []model.Message{{Role: model.RoleUser, Content: []session.Block{session.Text("count")}}},
	}, func(delta string) { deltas = append(deltas, delta) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", strings.Join(deltas, "|"))
	fmt.Println(resp.Text, resp.Finish)
	// Output:
	// "one t|wo t|hree"
	// one two three stop
}
