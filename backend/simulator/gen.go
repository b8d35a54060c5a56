package simulator

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"gseproc/model"
)

// tmpl is one entry of the process catalog a namespace is generated from.
type tmpl struct {
	name, procName   string
	setup, pid       string
	cfg, log         string
	user             string
	start, stop      string
	restart, reload  string
	kill, version    string
	health           string
	auto             model.AutoType
	cycle            int
	cpuLmt, memLmt   float64 // limits, percent of the machine
	cpuUse, memUse   float64 // typical usage, percent
	app, tier        string
	checkBegin       int
	stopCheck        int
	retries          int
	interval         int
	staging          bool    // also generate "<name>-staging" with env=staging
	frac             float64 // fraction of the role's hosts it is deployed on
	everywhere       bool    // deployed on hosts of every role (agents' plugins)
	versionText      string
	threads          int
	startFailOutputs []string
}

// catalog is the built-in set of realistic processes per namespace.
// Namespaces not listed get genericCatalog.
var catalog = map[string][]tmpl{
	"web": {
		{name: "nginx", procName: "nginx", setup: "/usr/local/nginx/sbin", pid: "/usr/local/nginx/logs/nginx.pid",
			cfg: "/usr/local/nginx/conf/nginx.conf", log: "/usr/local/nginx/logs",
			start: "./nginx", stop: "./nginx -s quit", restart: "./nginx -s stop; sleep 1; ./nginx", reload: "./nginx -s reload",
			kill: "pkill -9 -F /usr/local/nginx/logs/nginx.pid", version: "./nginx -v", health: "curl -sf http://127.0.0.1/healthz",
			auto: model.AutoResident, cpuLmt: 30, memLmt: 10, cpuUse: 4, memUse: 1.5, app: "nginx", tier: "frontend",
			staging: true, frac: 0.95, versionText: "nginx/1.24.0", threads: 5,
			startFailOutputs: []string{"nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)",
				"nginx: [emerg] unknown directive \"proxy_pas\" in /usr/local/nginx/conf/nginx.conf:42"}},
		{name: "php-fpm", procName: "php-fpm", setup: "/usr/local/php/sbin", pid: "/usr/local/php/var/run/php-fpm.pid",
			cfg: "/usr/local/php/etc/php-fpm.conf", log: "/usr/local/php/var/log", user: "www",
			start: "./php-fpm --daemonize", stop: "kill -QUIT $(cat /usr/local/php/var/run/php-fpm.pid)",
			restart: "kill -QUIT $(cat /usr/local/php/var/run/php-fpm.pid); sleep 1; ./php-fpm --daemonize",
			reload:  "kill -USR2 $(cat /usr/local/php/var/run/php-fpm.pid)", version: "./php-fpm -v",
			auto: model.AutoResident, cpuLmt: 50, memLmt: 20, cpuUse: 8, memUse: 6, app: "php-fpm", tier: "backend",
			frac: 0.6, versionText: "PHP 8.2.12 (fpm-fcgi)", threads: 1},
		{name: "node-api", procName: "node", setup: "/data/apps/node-api", pid: "/data/apps/node-api/run/node-api.pid",
			cfg: "/data/apps/node-api/config/production.json", log: "/data/apps/node-api/logs", user: "app",
			start: "./bin/start.sh", stop: "./bin/stop.sh", restart: "./bin/restart.sh", reload: "./bin/reload.sh",
			version: "node --version", health: "curl -sf http://127.0.0.1:3000/health",
			auto: model.AutoResident, cpuLmt: 60, memLmt: 25, cpuUse: 12, memUse: 8, app: "node-api", tier: "backend",
			staging: true, frac: 0.7, versionText: "v20.11.1", threads: 11,
			startFailOutputs: []string{"Error: listen EADDRINUSE: address already in use :::3000",
				"Error: Cannot find module '/data/apps/node-api/dist/server.js'"}},
		{name: "logrotate-web", procName: "logrotate", setup: "/usr/sbin", pid: "/var/run/gseproc/logrotate-web.pid",
			cfg: "/etc/logrotate.d/nginx", start: "./logrotate /etc/logrotate.d/nginx", stop: "true",
			auto: model.AutoPeriodic, cycle: 3600, cpuLmt: 10, memLmt: 5, cpuUse: 0.5, memUse: 0.1,
			app: "logrotate", tier: "ops", frac: 0.9, versionText: "logrotate 3.14.0", threads: 1},
	},
	"db": {
		{name: "mysqld", procName: "mysqld", setup: "/usr/local/mysql/bin", pid: "/data/mysql/mysqld.pid",
			cfg: "/etc/my.cnf", log: "/data/mysql/log", user: "mysql",
			start: "./mysqld_safe --defaults-file=/etc/my.cnf &", stop: "./mysqladmin --defaults-file=/etc/my.cnf shutdown",
			restart: "./mysqladmin --defaults-file=/etc/my.cnf shutdown; ./mysqld_safe --defaults-file=/etc/my.cnf &",
			reload:  "./mysqladmin --defaults-file=/etc/my.cnf flush-privileges", version: "./mysqld --version",
			auto: model.AutoResident, cpuLmt: 80, memLmt: 70, cpuUse: 20, memUse: 45, app: "mysql", tier: "data",
			checkBegin: 15, staging: true, frac: 0.9, versionText: "mysqld  Ver 8.0.36", threads: 38,
			startFailOutputs: []string{"[ERROR] [MY-010259] [Server] Another process with pid 2211 is using unix socket file.",
				"[ERROR] [MY-012574] [InnoDB] Unable to lock ./ibdata1 error: 11"}},
		{name: "mysqld-exporter", procName: "mysqld_exporter", setup: "/usr/local/mysqld_exporter",
			pid: "/var/run/mysqld_exporter.pid", log: "/var/log/mysqld_exporter", user: "prometheus",
			start: "./start.sh", stop: "./stop.sh", restart: "./restart.sh", version: "./mysqld_exporter --version",
			auto: model.AutoResident, cpuLmt: 5, memLmt: 2, cpuUse: 0.3, memUse: 0.2, app: "mysqld-exporter", tier: "monitor",
			frac: 0.8, versionText: "mysqld_exporter, version 0.15.1", threads: 8},
		{name: "mysql-backup", procName: "xtrabackup", setup: "/data/backup/bin", pid: "/data/backup/run/xtrabackup.pid",
			log: "/data/backup/log", user: "mysql", start: "./backup.sh full", stop: "./backup.sh abort",
			auto: model.AutoPeriodic, cycle: 86400, cpuLmt: 40, memLmt: 20, cpuUse: 15, memUse: 5,
			app: "xtrabackup", tier: "ops", frac: 0.5, versionText: "xtrabackup version 8.0.35", threads: 4},
		{name: "schema-migrate", procName: "migrate", setup: "/data/apps/migrate", pid: "/data/apps/migrate/migrate.pid",
			log: "/data/apps/migrate/logs", user: "app", start: "./migrate -path ./sql -database $DSN up", stop: "true",
			auto: model.AutoOneShot, cpuLmt: 20, memLmt: 5, cpuUse: 2, memUse: 0.5,
			app: "migrate", tier: "ops", frac: 0.3, versionText: "v4.17.0", threads: 3},
	},
	"cache": {
		{name: "redis-server", procName: "redis-server", setup: "/usr/local/redis/bin", pid: "/var/run/redis_6379.pid",
			cfg: "/etc/redis/6379.conf", log: "/var/log/redis", user: "redis",
			start: "./redis-server /etc/redis/6379.conf", stop: "./redis-cli -p 6379 shutdown",
			restart: "./redis-cli -p 6379 shutdown; ./redis-server /etc/redis/6379.conf",
			version: "./redis-server --version", health: "./redis-cli -p 6379 ping",
			auto: model.AutoResident, cpuLmt: 50, memLmt: 60, cpuUse: 6, memUse: 30, app: "redis", tier: "cache",
			staging: true, frac: 0.9, versionText: "Redis server v=7.2.4", threads: 5,
			startFailOutputs: []string{"# Can't open the log file: Permission denied",
				"# Warning: Could not create server TCP listening socket *:6379: bind: Address already in use"}},
		{name: "redis-sentinel", procName: "redis-sentinel", setup: "/usr/local/redis/bin", pid: "/var/run/redis-sentinel.pid",
			cfg: "/etc/redis/sentinel.conf", user: "redis",
			start: "./redis-sentinel /etc/redis/sentinel.conf", stop: "./redis-cli -p 26379 shutdown",
			auto: model.AutoResident, cpuLmt: 5, memLmt: 2, cpuUse: 0.4, memUse: 0.1, app: "redis-sentinel", tier: "cache",
			frac: 0.4, versionText: "Redis server v=7.2.4", threads: 5},
		{name: "memcached", procName: "memcached", setup: "/usr/local/memcached/bin", pid: "/var/run/memcached.pid",
			user: "nobody", start: "./memcached -d -m 4096 -P /var/run/memcached.pid", stop: "kill $(cat /var/run/memcached.pid)",
			auto: model.AutoResident, cpuLmt: 30, memLmt: 40, cpuUse: 3, memUse: 25, app: "memcached", tier: "cache",
			frac: 0.5, versionText: "memcached 1.6.22", threads: 10},
	},
	"batch": {
		{name: "celery-worker", procName: "celery", setup: "/data/apps/worker", pid: "/data/apps/worker/run/celery.pid",
			cfg: "/data/apps/worker/celeryconfig.py", log: "/data/apps/worker/logs", user: "app",
			start: "./bin/celery -A tasks worker --detach --pidfile=/data/apps/worker/run/celery.pid",
			stop:  "kill -TERM $(cat /data/apps/worker/run/celery.pid)", reload: "kill -HUP $(cat /data/apps/worker/run/celery.pid)",
			auto: model.AutoResident, cpuLmt: 70, memLmt: 30, cpuUse: 25, memUse: 10, app: "celery", tier: "batch",
			staging: true, frac: 0.9, versionText: "5.3.6 (emerald-rush)", threads: 9,
			startFailOutputs: []string{"kombu.exceptions.OperationalError: [Errno 111] Connection refused"}},
		{name: "report-cron", procName: "report", setup: "/data/apps/report", pid: "/data/apps/report/report.pid",
			log: "/data/apps/report/logs", user: "app", start: "./report --daily", stop: "true",
			auto: model.AutoPeriodic, cycle: 300, cpuLmt: 30, memLmt: 10, cpuUse: 5, memUse: 2,
			app: "report", tier: "batch", frac: 0.6, versionText: "report 2.3.1", threads: 2},
		{name: "etl-import", procName: "etl", setup: "/data/apps/etl", pid: "/data/apps/etl/etl.pid",
			log: "/data/apps/etl/logs", user: "app", start: "./etl import --once", stop: "true",
			auto: model.AutoOneShot, cpuLmt: 50, memLmt: 20, cpuUse: 30, memUse: 8,
			app: "etl", tier: "batch", frac: 0.3, versionText: "etl 0.9.4", threads: 4},
	},
	"gse": {
		{name: "bkmonitorbeat", procName: "bkmonitorbeat", setup: "/usr/local/gse2_bkte/plugins/bin",
			pid: "/var/run/gse2_bkte/bkmonitorbeat.pid", cfg: "/usr/local/gse2_bkte/plugins/etc/bkmonitorbeat.conf",
			log: "/var/log/gse2_bkte", start: "./start.sh bkmonitorbeat", stop: "./stop.sh bkmonitorbeat",
			restart: "./restart.sh bkmonitorbeat", reload: "./reload.sh bkmonitorbeat", version: "./bkmonitorbeat -v",
			auto: model.AutoResident, cpuLmt: 10, memLmt: 10, cpuUse: 1, memUse: 0.8, app: "bkmonitorbeat", tier: "agent",
			checkBegin: 30, frac: 0.97, everywhere: true, versionText: "3.40.1911", threads: 14},
		{name: "bkunifylogbeat", procName: "bkunifylogbeat", setup: "/usr/local/gse2_bkte/plugins/bin",
			pid: "/var/run/gse2_bkte/bkunifylogbeat.pid", cfg: "/usr/local/gse2_bkte/plugins/etc/bkunifylogbeat.conf",
			log: "/var/log/gse2_bkte", start: "./start.sh bkunifylogbeat", stop: "./stop.sh bkunifylogbeat",
			restart: "./restart.sh bkunifylogbeat", reload: "./reload.sh bkunifylogbeat", version: "./bkunifylogbeat -v",
			auto: model.AutoResident, cpuLmt: 30, memLmt: 10, cpuUse: 2, memUse: 1, app: "bkunifylogbeat", tier: "agent",
			checkBegin: 30, frac: 0.9, everywhere: true, versionText: "7.4.6", threads: 12},
		{name: "processbeat", procName: "processbeat", setup: "/usr/local/gse2_bkte/plugins/bin",
			pid: "/var/run/gse2_bkte/processbeat.pid", log: "/var/log/gse2_bkte",
			start: "./start.sh processbeat", stop: "./stop.sh processbeat", restart: "./restart.sh processbeat",
			auto: model.AutoResident, cpuLmt: 10, memLmt: 5, cpuUse: 0.5, memUse: 0.3, app: "processbeat", tier: "agent",
			checkBegin: 9, frac: 0.5, everywhere: true, versionText: "1.10.54", threads: 8},
	},
}

// genericCatalog is used for a namespace with no built-in catalog.
func genericCatalog(ns string) []tmpl {
	base := "/data/" + ns
	return []tmpl{
		{name: ns + "-server", procName: ns + "-server", setup: base + "/bin", pid: base + "/run/" + ns + "-server.pid",
			cfg: base + "/etc/server.conf", log: base + "/logs", start: "./start.sh", stop: "./stop.sh",
			restart: "./restart.sh", reload: "./reload.sh", auto: model.AutoResident, cpuLmt: 50, memLmt: 30,
			cpuUse: 8, memUse: 5, app: ns + "-server", tier: "backend", staging: true, frac: 0.9,
			versionText: "1.0.0", threads: 8},
		{name: ns + "-worker", procName: ns + "-worker", setup: base + "/bin", pid: base + "/run/" + ns + "-worker.pid",
			log: base + "/logs", start: "./worker.sh start", stop: "./worker.sh stop", restart: "./worker.sh restart",
			auto: model.AutoResident, cpuLmt: 40, memLmt: 20, cpuUse: 10, memUse: 4, app: ns + "-worker",
			tier: "batch", frac: 0.6, versionText: "1.0.0", threads: 4},
		{name: ns + "-cron", procName: ns + "-cron", setup: base + "/bin", pid: base + "/run/" + ns + "-cron.pid",
			log: base + "/logs", start: "./cron.sh", stop: "true", auto: model.AutoPeriodic, cycle: 600,
			cpuLmt: 20, memLmt: 10, cpuUse: 2, memUse: 1, app: ns + "-cron", tier: "batch", frac: 0.5,
			versionText: "1.0.0", threads: 1},
	}
}

// demoTemplates are the processes the API documents' examples name: the
// gse namespace's proc-test and proc-test-1 under /data/gsetest/.
func demoTemplates() []tmpl {
	var out []tmpl
	for _, n := range []string{"proc-test", "proc-test-1"} {
		// As gse-api.md §4.2's operate_proc_multi example spells them.
		out = append(out, tmpl{name: n, procName: n, setup: "/data/gsetest/", pid: "/data/gsetest/" + n + ".pid",
			cfg: "/data/gsetest/" + n + ".conf", log: "/data/gsetest/logs/", user: "root",
			start: "./start.sh", stop: "./stop.sh", restart: "./restart.sh", reload: "./reload.sh",
			kill: "./kill.sh", version: "./version.sh", health: "./health.sh",
			auto: model.AutoResident, checkBegin: 5, stopCheck: 5, retries: 3, interval: 20,
			cpuUse: 1, memUse: 0.5, app: "gsetest", tier: "test", versionText: "1.0.0", threads: 2})
	}
	return out
}

// def is a generated process definition and the rule placing it on hosts.
type def struct {
	proc     model.Process
	t        *tmpl
	role     int     // host role it is deployed on; -1 = every role
	frac     float64 // fraction of those hosts
	explicit []int32 // demo: exactly these hosts (sorted)
	fallback int32   // a host it is deployed on when the rule picks none (-1: unused)
	cmdline  string  // what status reports as the command line
	key      string  // proc.Key()
}

func (t tmpl) process(ns, name, env string) model.Process {
	p := model.Process{
		Meta: model.Meta{Namespace: ns, Name: name, Labels: map[string]string{
			"app": t.app, "tier": t.tier, "env": env, "proc_name": t.procName,
		}},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: t.procName, SetupPath: t.setup, PidPath: t.pid, ConfigPath: t.cfg,
				LogPath: t.log, User: t.user, Contact: ns},
			Control: model.Control{StartCmd: t.start, StopCmd: t.stop, RestartCmd: t.restart, ReloadCmd: t.reload,
				KillCmd: t.kill, VersionCmd: t.version, HealthCmd: t.health, ShellExt: "sh"},
			Resource: model.Resource{CPU: t.cpuLmt, Mem: t.memLmt},
			Policy:   t.policy(),
		},
	}
	if env == "staging" {
		// A staging twin lives beside the production one.
		p.Spec.Identity.PidPath = strings.TrimSuffix(t.pid, ".pid") + "-staging.pid"
		if t.cfg != "" {
			p.Spec.Identity.ConfigPath = path.Join(path.Dir(t.cfg), "staging", path.Base(t.cfg))
		}
	}
	return p
}

// policy is the template's monitor policy: the documented defaults
// (model.DefaultPolicy) for what the catalog leaves out (a zero in a
// template means not given: no template asks for a 0).
func (t tmpl) policy() model.Policy {
	pol := model.DefaultPolicy()
	pol.AutoType, pol.CycleTime, pol.StopCheckSecs = t.auto, t.cycle, t.stopCheck
	for _, f := range []struct {
		dst *int
		v   int
	}{
		{&pol.StartCheckSecs, t.checkBegin}, {&pol.StartRetries, t.retries}, {&pol.StartInterval, t.interval},
	} {
		if f.v != 0 {
			*f.dst = f.v
		}
	}
	return pol
}

// roleNamespaces are the namespaces hosts are assigned roles from: those
// whose catalog is not deployed everywhere.
func roleNamespaces(nss []string) []string {
	var out []string
	for _, ns := range nss {
		c, ok := catalog[ns]
		if ok && len(c) > 0 && c[0].everywhere {
			continue
		}
		out = append(out, ns)
	}
	if len(out) == 0 {
		out = []string{"general"}
	}
	return out
}

// genDefs builds the definitions for the namespaces. Demo definitions are
// appended by New once the demo hosts exist.
func genDefs(seed uint64, nss, roles []string) []def {
	roleOf := map[string]int{}
	for i, r := range roles {
		roleOf[r] = i
	}
	var out []def
	for _, ns := range nss {
		ts, ok := catalog[ns]
		if !ok {
			ts = genericCatalog(ns)
		}
		for ti := range ts {
			t := &ts[ti]
			role := -1
			if !t.everywhere {
				role = roleOf[ns]
			}
			envs := []string{"prod"}
			if t.staging {
				envs = append(envs, "staging")
			}
			for _, env := range envs {
				name := t.name
				frac := t.frac
				if env == "staging" {
					name += "-staging"
					frac *= 0.2
				}
				// The seed moves each fraction a little, so fleets differ by seed.
				idx := uint64(len(out))
				frac *= 0.85 + 0.15*hash01(seed, hFrac, idx)
				out = append(out, def{proc: t.process(ns, name, env), t: t, role: role, frac: frac, fallback: -1})
			}
		}
	}
	return out
}

// Zones by cloud area, for host labels.
var regions = []string{"ap-shanghai", "ap-guangzhou", "ap-beijing", "ap-chengdu", "ap-hongkong", "ap-singapore"}

var osNames = []string{"tlinux-2.4", "centos-7.9", "rocky-9.3", "ubuntu-22.04"}

func zoneName(cloud int, zone uint8) string {
	r := fmt.Sprintf("region-%d", cloud)
	if cloud < len(regions) {
		r = regions[cloud]
	}
	return fmt.Sprintf("%s-%d", r, zone+1)
}

// hostIP is the j-th address of a cloud area: 10.<cloud>.x.y with y in
// 1..254, carrying into the second octet past 254*256 hosts (addresses
// only need to be unique within a cloud area).
func hostIP(cloud, j int) netip.Addr {
	v := uint32(10)<<24 + uint32(cloud)<<16 + uint32(j/254)<<8 + uint32(j%254+1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
