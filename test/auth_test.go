package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/devserver"
)

// TestMutualTLS: a worker process and a starter process reach an embedded server that
// requires client certificates, configured by nothing but the standard client environment
// (TEMPORAL_ADDRESS, TEMPORAL_TLS_*), as on Temporal Cloud (docs/auth.md); a starter with a
// certificate of another CA, and one that does not trust the server, fail at once with an
// error that says so, and a worker with the wrong certificate exits instead of polling.
func TestMutualTLS(t *testing.T) {
	certs, err := devserver.GenerateDevCerts(t.TempDir())
	require.NoError(t, err)
	other, err := devserver.GenerateDevCerts(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, LogLevel: "error", TLS: certs.TLS()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })

	tlsEnv := func(ca, cert, key string) []string {
		return []string{
			"TEMPORAL_ADDRESS=" + srv.FrontendAddr(), "TEMPORAL_NAMESPACE=" + srv.Namespace(),
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + ca,
			"TEMPORAL_TLS_CLIENT_CERT_PATH=" + cert, "TEMPORAL_TLS_CLIENT_KEY_PATH=" + key,
		}
	}
	good := tlsEnv(certs.CA, certs.ClientCert, certs.ClientKey)
	f := newFaultEnv(t, "")
	f.addr = srv.FrontendAddr()
	f.extraEnv = good
	f.startWorker()

	dir := t.TempDir()
	starter := func(vars []string, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		cmd := exec.CommandContext(ctx, env.starter, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), vars...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		require.NoError(t, ctx.Err(), "the starter hung: %s", stderr.String())
		return exitCode(t, err), stdout.String(), stderr.String()
	}
	run := []string{"run", "--task-queue", f.taskQueue, "--model-provider", "scripted",
		"--model", script(t, dir, `{"text": "over mTLS"}`), "say hi"}

	code, stdout, stderr := starter(good, run...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "over mTLS")

	// A client certificate of another CA: the server refuses the handshake.
	code, _, stderr = starter(tlsEnv(certs.CA, other.ClientCert, other.ClientKey), run...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "starter: connect to Temporal at "+srv.FrontendAddr())
	assert.Contains(t, stderr, "certificate", "the error names the certificate: %s", stderr)

	// A client that does not trust the server's certificate.
	code, _, stderr = starter(tlsEnv(other.CA, certs.ClientCert, certs.ClientKey), run...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "x509: certificate signed by unknown authority")

	// A worker with the wrong certificate stops at start, saying why.
	bin, err := workerBin()
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()
	cmd := exec.CommandContext(wctx, bin, "--task-queue", f.taskQueue)
	cmd.Env = append(os.Environ(), tlsEnv(certs.CA, other.ClientCert, other.ClientKey)...)
	cmd.Env = append(cmd.Env, "SUBFLOW_SESSION_ROOT="+filepath.Join(t.TempDir(), "sessions"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, wctx.Err(), "the worker hung: %s", out)
	assert.Equal(t, 1, exitCode(t, err))
	assert.Contains(t, string(out), "connect to Temporal")
	assert.Contains(t, string(out), "certificate")
}
