package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"gseproc/model"
)

// runApply creates or replaces process definitions from a JSON file: one
// definition {"process": {"meta": …, "spec": …}, "hosts": [{"ip", "bk_cloud_id"}]}
// or an array of them. Every definition is validated first; nothing is
// saved when any is invalid.
func runApply(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("apply", "apply FILE [flags]", io)
	var cf commonFlags
	cf.register(fs)
	dry := fs.Bool("dry-run", false, "validate and print what would be saved, save nothing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: gseproc apply FILE [flags]

Create or replace process definitions from FILE ("-" reads standard input):
a JSON definition, or an array of them, shaped as 'gseproc procs --json'
prints them:

  {"process": {"meta": {"namespace": "demo", "name": "ticker", "labels": {"app": "ticker"}},
               "spec": {"identity": {"proc_name": "ticker", "setup_path": "/tmp", "pid_path": "/tmp/ticker.pid"},
                        "control": {"start_cmd": "...", "stop_cmd": "..."},
                        "resource": {"cpu": 10, "mem": 10},
                        "monitor_policy": {"auto_type": 1, "start_check_secs": 1, "op_timeout": 30}}},
   "hosts": [{"ip": "127.0.0.2", "bk_cloud_id": 0}]}

Every definition is checked first (each bad field is named); nothing is
saved when one is invalid. meta.namespace and meta.name are 1-128 of
A-Z a-z 0-9 . _ - (the name rule: README, Names). Policy fields left out take the documented
defaults (start_check_secs 5, op_timeout 60, start_retries 4,
start_interval 10, instance_num 1); a value given is kept, 0 included
(start_check_secs 0: judged at once; start_retries 0: never restarted;
start_interval 0: the agent's own backoff).

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("apply", "want exactly one FILE, got %d arguments", len(pos))
	}
	defs, err := readDefs(pos[0], io)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	v := &model.Validator{}
	for i, d := range defs {
		prefix := fmt.Sprintf("[%d].", i)
		if len(defs) == 1 {
			prefix = ""
		}
		d.Process.ValidateDefInto(v, prefix+"process", nil)
		if len(d.Hosts) == 0 {
			v.Add(prefix+"hosts", "required: at least one host")
		}
		for j, h := range d.Hosts {
			h.Validate(v, fmt.Sprintf("%shosts[%d]", prefix, j))
		}
	}
	if err := v.Err(); err != nil {
		for _, fe := range v.Errors() {
			fmt.Fprintf(io.Err, "  %s: %s\n", fe.Field, fe.Reason)
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: %d invalid field(s), nothing saved", pos[0], len(v.Errors()))}
	}
	if *dry {
		for _, d := range defs {
			fmt.Fprintf(io.Out, "would save %s on %d host(s)\n", d.Process.Key(), len(d.Hosts))
		}
		return nil
	}
	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	for _, d := range defs {
		if err := b.SaveProcess(ctx, d); err != nil {
			return fmt.Errorf("save %s: %w", d.Process.Key(), err)
		}
		fmt.Fprintf(io.Out, "saved %s on %d host(s)\n", d.Process.Key(), len(d.Hosts))
	}
	return nil
}

// readDefs reads one definition or an array of them; policy fields a
// definition leaves out take their documented defaults, so a file need not
// repeat them.
func readDefs(path string, io Stdio) ([]model.ProcessDef, error) {
	var raw []byte
	var err error
	if path == "-" {
		var buf bytes.Buffer
		_, err = buf.ReadFrom(io.In)
		raw = buf.Bytes()
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read definitions: %w", err)
	}
	raw = bytes.TrimSpace(raw)
	dec := func(b []byte, into any) error {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(into)
	}
	// Each definition is decoded into model.NewProcessDef: a policy field
	// the file leaves out has its documented default, one it gives (0
	// included) its value.
	if len(raw) > 0 && raw[0] == '[' {
		var each []json.RawMessage
		if err := dec(raw, &each); err != nil {
			return nil, fmt.Errorf("%s: %w", path, describeJSONError(err))
		}
		defs := make([]model.ProcessDef, len(each))
		for i, b := range each {
			defs[i] = model.NewProcessDef()
			if err := dec(b, &defs[i]); err != nil {
				return nil, fmt.Errorf("%s: [%d]: %w", path, i, describeJSONError(err))
			}
		}
		return defs, nil
	}
	one := model.NewProcessDef()
	if err := dec(raw, &one); err != nil {
		return nil, fmt.Errorf("%s: %w", path, describeJSONError(err))
	}
	return []model.ProcessDef{one}, nil
}

// describeJSONError names the field of a type error.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err
}

// runDelete removes definitions by key.
func runDelete(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("delete", "delete NAMESPACE:NAME... [flags]", io)
	var cf commonFlags
	cf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("delete", "want at least one NAMESPACE:NAME")
	}
	for _, k := range pos {
		if _, _, ok := model.SplitKey(k); !ok {
			return usageError("delete", "%q is not NAMESPACE:NAME", k)
		}
	}
	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	for _, k := range pos {
		if err := b.DeleteProcess(ctx, k); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
		fmt.Fprintf(io.Out, "deleted %s\n", k)
	}
	return nil
}
