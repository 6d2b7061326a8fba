package app_test

import (
	"log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/worker/app"
)

// ExampleNew runs the stock worker inside a program of one's own: every workflow and activity
// registered over a session store and the default models. It needs a Temporal server, so go
// test compiles it without running it; `starter dev` and the end-to-end tests run the same.
// A worker binary of one's own with the worker command's flags is one line:
// os.Exit(app.Main(os.Args, os.Stdout, os.Stderr)).
func ExampleNew() {
	c, err := client.Dial(client.Options{}) // localhost:7233, namespace "default"
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, cleanup, err := app.New(c, app.Options{SessionStore: "/var/lib/subflow/sessions"})
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}
