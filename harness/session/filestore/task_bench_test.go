package filestore_test

import (
	"testing"

	"github.com/subflow-dev/subflow/harness/session/storetest"
)

// BenchmarkBatchTask: see storetest.BenchmarkBatchTask. The sessions live under TMPDIR: set
// it to a directory on the disk a worker's sessions will use.
//
//	go test -run '^$' -bench BatchTask -benchtime 2000x ./harness/session/filestore/
func BenchmarkBatchTask(b *testing.B) {
	storetest.BenchmarkBatchTask(b, newStore(b, b.TempDir()))
}
