// Package e2e holds subflow's end-to-end tests: one embedded Temporal server (package
// devserver) shared by every test of the package, a real worker (worker/app) with the test
// binary itself as the sdk child runtime, the scripted model, and the starter binary run
// as users run it. Set SUBFLOW_RECORD_HISTORIES=1 to record the histories that
// workflows' replay test replays (workflows/testdata).
package e2e
