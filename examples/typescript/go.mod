// This folder holds no Go code. The go.mod makes it a module of its own, so that the Go
// sources some npm packages ship inside node_modules stay out of the subflow module's
// ./... patterns (go build, go vet, go test).
module github.com/subflow-dev/subflow/examples/typescript

go 1.26
