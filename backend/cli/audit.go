package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"gseproc/model"
)

// runAudit lists the audit trail.
func runAudit(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("audit", "audit [flags]", io)
	var cf commonFlags
	cf.register(fs)
	var q model.AuditQuery
	var since, until string
	jsonOut := fs.Bool("json", false, "print one JSON object per line instead of a table")
	fs.StringVar(&q.App, "app", "", "only entries of this gateway `app`")
	fs.StringVar(&q.User, "user", "", "only entries on behalf of this `user` (bk_username)")
	fs.StringVar(&q.Operator, "operator", "", "only entries of this `operator` (a terminal's user, an SSH key's operator)")
	fs.StringVar(&q.Namespace, "ns", "", "only entries touching this `namespace`")
	fs.StringVar(&q.Action, "action", "", "only this `action`: "+strings.Join(model.AuditActions, ", "))
	fs.StringVar(&q.Op, "op", "", "only this `op` (start, stop, restart, ...)")
	fs.StringVar(&q.TaskID, "task", "", "only entries of this task `id`")
	fs.StringVar(&q.Result, "result", "", "only this `result`: ok, refused, error")
	fs.StringVar(&since, "since", "", "only entries at or after `TIME`: RFC 3339 (2026-01-02T15:04:05Z) or a duration back from now (1h, 30m)")
	fs.StringVar(&until, "until", "", "only entries before `TIME` (same forms as --since)")
	fs.IntVar(&q.Limit, "limit", model.DefaultAuditLimit, fmt.Sprintf("list at most `N` entries (newest first, at most %d)", model.MaxAuditLimit))
	fs.Usage = listUsage(fs, "audit [flags]", "List the audit trail, newest first: every operation, cancel and change to the\n"+
		"definitions, with who asked for it (app, user, operator, channel), its scope,\ntargets, task and outcome. With --server, the server's durable trail (as far\n"+
		"as the server's credentials may see); without, the embedded engine's.")
	if err := parseList("audit", fs, args); err != nil {
		return err
	}
	now := time.Now()
	var errs []error
	for _, t := range []struct {
		flag, val string
		dst       *time.Time
	}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
		if t.val == "" {
			continue
		}
		tm, err := parseWhen(t.val, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.flag, err))
		}
		*t.dst = tm
	}
	v := &model.Validator{}
	q.ValidateInto(v)
	if err := v.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return usageError("audit", "%v", err)
	}
	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	es, err := b.Audit(ctx, q)
	if err != nil {
		return err
	}
	if *jsonOut {
		return jsonLines(io.Out, es)
	}
	tw := tabwriter.NewWriter(io.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tWHO\tACTION\tOP\tNAMESPACES\tTARGETS\tTASK\tRESULT\tSUMMARY")
	for _, e := range es {
		targets := strings.Join(e.Targets, ",")
		if e.TargetCount > 0 {
			targets = fmt.Sprintf("%s (%d)", targets, e.TargetCount)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Local().Format(time.DateTime), e.Actor,
			e.Action, dash(e.Op), dash(strings.Join(e.Namespaces, ",")), dash(targets), dash(e.TaskID), e.Result, e.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "%d entries\n", len(es))
	return nil
}

// parseWhen reads an RFC 3339 time or a duration back from now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now must be positive", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration (1h)", s)
	}
	return t, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
