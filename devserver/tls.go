package devserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/server/common/config"
)

// TLS makes the frontend serve TLS (docs/auth.md). The server's own clients (its system
// worker, its Web UI, ClientOptions) authenticate with a certificate of a throwaway CA made
// at Start and trust exactly the server's certificate, so they need nothing from the caller.
type TLS struct {
	// CertFile and KeyFile are the server's certificate (PEM, the leaf first) and its key.
	CertFile, KeyFile string
	// ClientCAFile, when set, requires mutual TLS: every client must present a certificate
	// signed by one of the CAs in this PEM file. Empty serves TLS without client certificates.
	ClientCAFile string
}

// serverTLS is what Start derives from a TLS: the server's certificate, its name for
// verification, and the internal clients' credentials.
type serverTLS struct {
	opts       TLS
	leaf       *x509.Certificate
	leafPEM    []byte
	serverName string
	clientCA   []byte // PEM of the CAs clients are verified against (the caller's and ours)
	clientCert tls.Certificate
	clientPEM  certPEM
}

// loadTLS checks o's files and makes the internal client credentials; nil o means no TLS.
func loadTLS(o *TLS, ip string) (*serverTLS, error) {
	if o == nil {
		return nil, nil
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("devserver: TLS needs both a certificate file and a key file")
	}
	pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("devserver: TLS certificate %s with key %s: %w", o.CertFile, o.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("devserver: TLS certificate %s: %w", o.CertFile, err)
	}
	s := &serverTLS{opts: *o, leaf: leaf, leafPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})}
	// Internal clients dial dialHost(ip); they verify the certificate for that address when it
	// names it, else for its first DNS name.
	s.serverName = dialHost(ip)
	if leaf.VerifyHostname(s.serverName) != nil && len(leaf.DNSNames) > 0 {
		s.serverName = leaf.DNSNames[0]
	}
	if err := leaf.VerifyHostname(s.serverName); err != nil {
		return nil, fmt.Errorf("devserver: TLS certificate %s: %w", o.CertFile, err)
	}
	ca, err := newCA("subflow devserver internal CA")
	if err != nil {
		return nil, err
	}
	if s.clientPEM, err = ca.issue("subflow devserver internal client", false, nil); err != nil {
		return nil, err
	}
	if s.clientCert, err = tls.X509KeyPair(s.clientPEM.cert, s.clientPEM.key); err != nil {
		return nil, fmt.Errorf("devserver: internal client certificate: %w", err)
	}
	if o.ClientCAFile != "" {
		caPEM, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("devserver: TLS client CA: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("devserver: TLS client CA %s holds no PEM certificate", o.ClientCAFile)
		}
		s.clientCA = append(append(caPEM, '\n'), ca.certPEM...)
	}
	return s, nil
}

// clientConfig is the TLS configuration of the server's own clients.
func (s *serverTLS) clientConfig() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(s.leaf) // a leaf in the root pool is trusted as it is
	return &tls.Config{Certificates: []tls.Certificate{s.clientCert}, RootCAs: roots, ServerName: s.serverName, MinVersion: tls.VersionTLS12}
}

// apply sets the frontend's TLS and the system worker's client TLS in conf.
func (s *serverTLS) apply(conf *config.Config) {
	if s == nil {
		return
	}
	b64 := base64.StdEncoding.EncodeToString
	server := config.ServerTLS{CertFile: s.opts.CertFile, KeyFile: s.opts.KeyFile}
	if s.clientCA != nil {
		server.RequireClientAuth = true
		server.ClientCAData = []string{b64(s.clientCA)}
	}
	conf.Global.TLS.Frontend.Server = server
	conf.Global.TLS.SystemWorker = config.WorkerTLS{
		CertData: b64(s.clientPEM.cert),
		KeyData:  b64(s.clientPEM.key),
		Client:   config.ClientTLS{ServerName: s.serverName, RootCAData: []string{b64(s.leafPEM)}},
	}
}

// certPEM is a PEM certificate and its PEM key.
type certPEM struct{ cert, key []byte }

// ca is a throwaway certificate authority.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// certValidity is how long generated certificates are valid: throwaway, for development.
const certValidity = 30 * 24 * time.Hour

func newCA(name string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devserver: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devserver: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devserver: CA certificate: %w", err)
	}
	return &ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue makes a certificate signed by c: for a server (valid for hosts, IPs or names) or a
// client.
func (c *ca) issue(name string, server bool, hosts []string) (certPEM, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certPEM{}, fmt.Errorf("devserver: key of %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return certPEM{}, fmt.Errorf("devserver: certificate of %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certPEM{}, fmt.Errorf("devserver: key of %s: %w", name, err)
	}
	return certPEM{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// DevCerts are the files of GenerateDevCerts.
type DevCerts struct {
	Dir string
	// CA is the CA certificate: clients trust the server with it
	// (TEMPORAL_TLS_SERVER_CA_CERT_PATH) and the server verifies clients with it
	// (TLS.ClientCAFile).
	CA string
	// ServerCert and ServerKey are the server's (TLS.CertFile, TLS.KeyFile).
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's (TEMPORAL_TLS_CLIENT_CERT_PATH,
	// TEMPORAL_TLS_CLIENT_KEY_PATH).
	ClientCert, ClientKey string
}

// TLS is the server side of the files, with mutual TLS.
func (d DevCerts) TLS() *TLS {
	return &TLS{CertFile: d.ServerCert, KeyFile: d.ServerKey, ClientCAFile: d.CA}
}

// GenerateDevCerts writes a throwaway CA, a server certificate valid for hosts (names or
// IPs; 127.0.0.1 and localhost when empty) and a client certificate into dir, which must
// exist, unless the files are there already; it returns their paths. They are for
// development: valid 30 days, keys unencrypted (mode 0600).
func GenerateDevCerts(dir string, hosts ...string) (DevCerts, error) {
	d := DevCerts{
		Dir: dir, CA: filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	all := []string{d.CA, d.ServerCert, d.ServerKey, d.ClientCert, d.ClientKey}
	present := 0
	for _, f := range all {
		if _, err := os.Stat(f); err == nil {
			present++
		}
	}
	switch present {
	case len(all):
		return d, nil
	case 0:
	default:
		return DevCerts{}, fmt.Errorf("devserver: %s holds some of the dev certificates only: remove them or add the others", dir)
	}
	if len(hosts) == 0 {
		hosts = []string{localhost, "localhost"}
	}
	c, err := newCA("subflow dev CA")
	if err != nil {
		return DevCerts{}, err
	}
	server, err := c.issue("subflow dev server", true, hosts)
	if err != nil {
		return DevCerts{}, err
	}
	client, err := c.issue("subflow dev client", false, nil)
	if err != nil {
		return DevCerts{}, err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{d.CA, c.certPEM, 0o644},
		{d.ServerCert, server.cert, 0o644}, {d.ServerKey, server.key, 0o600},
		{d.ClientCert, client.cert, 0o644}, {d.ClientKey, client.key, 0o600},
	} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return DevCerts{}, fmt.Errorf("devserver: write dev certificates: %w", err)
		}
	}
	return d, nil
}
