package dist

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"gseproc/backend/config"
	"gseproc/backend/sshconsole"
)

// nfpmPin is the nfpm the Makefile runs (one pin for both).
func nfpmPin(t *testing.T, root string) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NFPM\s*\?=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no NFPM ?= line in the Makefile")
	}
	return string(m[1])
}

func goCmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// copyTree copies a file or a directory's files (modes kept).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// arMembers reads an ar archive (a .deb) into its members.
func arMembers(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		t.Fatalf("not an ar archive: %q", b[:min(len(b), 8)])
	}
	out := map[string][]byte{}
	var order []string
	for p := 8; p < len(b); {
		if p+60 > len(b) || string(b[p+58:p+60]) != "`\n" {
			t.Fatalf("bad ar header at %d", p)
		}
		name := strings.TrimRight(strings.TrimSpace(string(b[p:p+16])), "/")
		size, err := strconv.Atoi(strings.TrimSpace(string(b[p+48 : p+58])))
		if err != nil || p+60+size > len(b) {
			t.Fatalf("bad ar member size at %d", p)
		}
		out[name] = b[p+60 : p+60+size]
		order = append(order, name)
		p += 60 + size + size%2
	}
	if len(order) != 3 || order[0] != "debian-binary" {
		t.Fatalf("deb members %v, want debian-binary, control, data", order)
	}
	return out
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// tarGz reads a .tar.gz into its entries by cleaned path ("etc/x").
func tarGz(t *testing.T, b []byte) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = entry{h, data}
	}
}

// unitKeys reads a systemd unit into section.key -> values.
func unitKeys(data []byte) map[string][]string {
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, _ := strings.Cut(l, "=")
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// TestPackage builds the .deb and the .rpm as `make package` does and
// inspects the .deb as dpkg sees it: the files and their modes, the
// units' restart policy, hardening and environment file, the config
// files dpkg keeps on upgrade, a default config that loads, and maintainer
// scripts that are valid sh and do what they must.
func TestPackage(t *testing.T) {
	if os.Getenv("GSEPROC_TEST_PACKAGE") == "" {
		t.Skip("opt-in (make test-package): a full build of the binary and nfpm from the module proxy")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// nfpm runs in a tree of its own holding what nfpm.yaml names, so the
	// repository's bin/ is left alone.
	tree, out := t.TempDir(), t.TempDir()
	for _, p := range []string{"backend/dist/nfpm.yaml", "backend/dist/files", "backend/dist/scripts", "config.example.toml", "README.md"} {
		copyTree(t, filepath.Join(root, p), filepath.Join(tree, p))
	}
	bin := filepath.Join(tree, "bin", "pkg", "gseproc")
	goCmd(t, root, []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-o", bin, ".") // as make package builds them
	agentBin := filepath.Join(tree, "bin", "pkg", "gseproc-agent")
	goCmd(t, root, []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-o", agentBin, "./backend/agent/cmd/gseproc-agent")
	env := []string{"VERSION=1.2.3~test", "GOARCH=" + runtime.GOARCH}
	for _, p := range []string{"deb", "rpm"} {
		goCmd(t, tree, env, "run", nfpmPin(t, root), "package", "--config", "backend/dist/nfpm.yaml", "--packager", p, "--target", out+"/")
	}
	rpms, _ := filepath.Glob(filepath.Join(out, "*.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("rpm files: %v", rpms)
	}
	if r, _ := os.ReadFile(rpms[0]); !bytes.HasPrefix(r, []byte{0xed, 0xab, 0xee, 0xdb}) {
		t.Fatalf("%s is not an rpm", rpms[0])
	}
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 1 || !strings.Contains(filepath.Base(debs[0]), "1.2.3~test") {
		t.Fatalf("deb files: %v", debs)
	}
	raw, err := os.ReadFile(debs[0])
	if err != nil {
		t.Fatal(err)
	}
	ar := arMembers(t, raw)
	if string(ar["debian-binary"]) != "2.0\n" {
		t.Fatalf("debian-binary %q", ar["debian-binary"])
	}
	control := tarGz(t, ar["control.tar.gz"])
	data := tarGz(t, ar["data.tar.gz"])

	// Files, modes, and the binary itself.
	binBytes, _ := os.ReadFile(bin)
	want := map[string]int64{
		"usr/bin/gseproc": 0o755, "usr/bin/gseproc-agent": 0o755, "lib/systemd/system/gseproc-server.service": 0o644,
		"lib/systemd/system/gseproc-agent.service": 0o644, "etc/gseproc/config.toml": 0o640,
		"lib/systemd/system/gseproc-ssh.service": 0o644, "etc/gseproc/ssh_authorized_keys": 0o640,
		"etc/gseproc/gseproc.env": 0o644, "usr/share/doc/gseproc/config.example.toml": 0o644,
		"usr/share/doc/gseproc/README.md": 0o644, "var/lib/gseproc": 0o750,
	}
	for p, mode := range want {
		e, ok := data[p]
		if !ok {
			t.Errorf("%s is not in the package", p)
			continue
		}
		if e.hdr.Mode&0o7777 != mode || e.hdr.Uname != "root" {
			t.Errorf("%s: mode %o owner %s, want %o root", p, e.hdr.Mode&0o7777, e.hdr.Uname, mode)
		}
	}
	if !bytes.Equal(data["usr/bin/gseproc"].data, binBytes) {
		t.Error("usr/bin/gseproc is not the binary built")
	}
	if agentBytes, _ := os.ReadFile(agentBin); !bytes.Equal(data["usr/bin/gseproc-agent"].data, agentBytes) {
		t.Error("usr/bin/gseproc-agent is not the agent binary built")
	}

	// The units.
	srv := unitKeys(data["lib/systemd/system/gseproc-server.service"].data)
	agent := unitKeys(data["lib/systemd/system/gseproc-agent.service"].data)
	sshd := unitKeys(data["lib/systemd/system/gseproc-ssh.service"].data)
	for _, c := range []struct {
		unit map[string][]string
		key  string
		want string
	}{
		{srv, "Service.ExecStart", "/usr/bin/gseproc server --config /etc/gseproc/config.toml $GSEPROC_SERVER_ARGS"},
		{srv, "Service.User", "gseproc"},
		{srv, "Service.Restart", "on-failure"},
		{srv, "Service.EnvironmentFile", "-/etc/gseproc/gseproc.env"},
		{srv, "Service.StateDirectory", "gseproc"},
		{srv, "Service.NoNewPrivileges", "yes"},
		{srv, "Service.ProtectSystem", "strict"},
		{srv, "Service.ReadWritePaths", "/var/lib/gseproc"},
		{srv, "Service.CapabilityBoundingSet", ""},
		{srv, "Service.PrivateDevices", "yes"},
		{srv, "Install.WantedBy", "multi-user.target"},
		{agent, "Service.ExecStart", "/usr/bin/gseproc agent --config /etc/gseproc/config.toml --data-dir /var/lib/gseproc/agent $GSEPROC_AGENT_ARGS"},
		{agent, "Service.User", "root"},
		{agent, "Service.Restart", "always"},
		{agent, "Service.KillMode", "process"},
		{agent, "Service.EnvironmentFile", "-/etc/gseproc/gseproc.env"},
		{agent, "Install.WantedBy", "multi-user.target"},
		{sshd, "Service.ExecStart", "/usr/bin/gseproc ssh --config /etc/gseproc/config.toml $GSEPROC_SSH_ARGS"},
		{sshd, "Service.User", "gseproc"},
		{sshd, "Service.ProtectSystem", "strict"},
		{sshd, "Service.EnvironmentFile", "-/etc/gseproc/gseproc.env"},
	} {
		if got := c.unit[c.key]; len(got) != 1 || got[0] != c.want {
			t.Errorf("%s = %q, want %q", c.key, got, c.want)
		}
	}
	// systemd, where the machine has it, knows every directive (it cannot
	// check ExecStart here: the package is not installed).
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		var units []string
		for _, u := range []string{"gseproc-server.service", "gseproc-agent.service", "gseproc-ssh.service"} {
			p := filepath.Join(out, u)
			if err := os.WriteFile(p, data["lib/systemd/system/"+u].data, 0o644); err != nil {
				t.Fatal(err)
			}
			units = append(units, p)
		}
		outb, _ := exec.Command(sa, append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
		for _, l := range strings.Split(strings.TrimSpace(string(outb)), "\n") {
			if l != "" && !strings.Contains(l, "/usr/bin/gseproc is not executable") {
				t.Errorf("systemd-analyze verify: %s", l)
			}
		}
	}
	// Every flag the units pass exists: the binary accepts them.
	for _, args := range [][]string{{"server", "--config", "/dev/null", "--help"}, {"agent", "--config", "/dev/null", "--data-dir", "/tmp", "--help"},
		{"ssh", "--config", "/dev/null", "--server", "http://127.0.0.1:8080", "--help"}} {
		if outb, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("gseproc %v: %v\n%s", args, err, outb)
		}
	}

	// The default config loads as the units load it, with durable state.
	cfgPath := filepath.Join(out, "config.toml")
	if err := os.WriteFile(cfgPath, data["etc/gseproc/config.toml"].data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil || len(cfg.Warnings) > 0 {
		t.Fatalf("installed config: %v %v", err, cfg.Warnings)
	}
	// The shipped authorized-keys file is all comments: gseproc ssh refuses
	// to start on it until a key is added, rather than let nobody in silently.
	keysPath := filepath.Join(out, "ssh_authorized_keys")
	if err := os.WriteFile(keysPath, data["etc/gseproc/ssh_authorized_keys"].data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sshconsole.LoadAuthorizedKeys(keysPath); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("shipped authorized keys: %v", err)
	}
	if cfg.NATS.StoreDir != "/var/lib/gseproc/nats" || cfg.Agent.DataDir != "/var/lib/gseproc/agent" {
		t.Errorf("installed config: store_dir %q, agent data_dir %q", cfg.NATS.StoreDir, cfg.Agent.DataDir)
	}

	// Control: the package, its conffiles, its scripts.
	ctl := string(control["control"].data)
	for _, l := range []string{"Package: gseproc\n", "Version: 1.2.3~test-1\n", "Architecture: " + runtime.GOARCH + "\n", "Section: admin\n"} {
		if !strings.Contains(ctl, l) {
			t.Errorf("control has no %q:\n%s", l, ctl)
		}
	}
	conf := strings.Fields(string(control["conffiles"].data))
	if strings.Join(conf, " ") != "/etc/gseproc/config.toml /etc/gseproc/gseproc.env /etc/gseproc/ssh_authorized_keys" {
		t.Errorf("conffiles %v", conf)
	}
	scripts := map[string][]string{
		"preinst":  {"groupadd --system gseproc", "useradd --system --gid gseproc"},
		"postinst": {"install -d -o gseproc -g gseproc -m 0750 /var/lib/gseproc", "chown root:gseproc /etc/gseproc/config.toml", "systemctl daemon-reload", "try-restart"},
		"prerm":    {"systemctl disable --now gseproc-server.service gseproc-agent.service gseproc-ssh.service"},
		"postrm":   {"systemctl daemon-reload", "rm -rf /var/lib/gseproc"},
	}
	for name, musts := range scripts {
		e, ok := control[name]
		if !ok {
			t.Errorf("no %s script", name)
			continue
		}
		if e.hdr.Mode&0o111 == 0 {
			t.Errorf("%s is not executable: %o", name, e.hdr.Mode)
		}
		for _, m := range musts {
			if !bytes.Contains(e.data, []byte(m)) {
				t.Errorf("%s does not %q", name, m)
			}
		}
		p := filepath.Join(out, name)
		if err := os.WriteFile(p, e.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if outb, err := exec.Command("sh", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", name, err, outb)
		}
	}
	t.Log(fmt.Sprintf("deb %d bytes, %d files", len(raw), len(data)))
}
