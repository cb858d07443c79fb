//! Clients of the simulated cluster's network: `nslookup` (cluster DNS, printed as Alpine's
//! busybox did), `nc`, and the clients of the servers kudo-sim stands in for — `zkCli.sh`
//! (`ls`, `get`, `create`, `delete`), `redis-cli` (`PING`, `SET`, `GET`, `DEL`, `CLUSTER INFO`,
//! `CLUSTER NODES`, `--cluster create`), `mysql` (`SHOW DATABASES`, `CREATE`/`DROP DATABASE`,
//! `USE`, `SELECT 1`, `SET`) and `mysqldump` (the `CREATE DATABASE` statements of databases).
//! A client reaches a stand-in only through a name that resolves and a port it listens on; the
//! simulated servers check no passwords.

use super::{Args, Program};
use crate::shell::exec::{Flow, Io, Shell};
use crate::shell::standins::{Data, Protocol, RedisData};

pub(crate) const NAMES: &[&str] = &[
    "nslookup",
    "nc",
    "netcat",
    "zkCli.sh",
    "redis-cli",
    "mysql",
    "mariadb",
    "mysqldump",
    "mariadb-dump",
];

pub(crate) fn lookup(name: &str) -> Option<Program> {
    Some(match name {
        "nslookup" => nslookup,
        "nc" | "netcat" => nc,
        "zkCli.sh" => zkcli,
        "redis-cli" => redis_cli,
        "mysql" | "mariadb" => mysql,
        "mysqldump" | "mariadb-dump" => mysqldump,
        _ => return None,
    })
}

/// The address `host` reaches from this container (`localhost` is the pod itself).
fn address(sh: &Shell<'_>, host: &str) -> Option<String> {
    if matches!(host, "localhost" | "127.0.0.1" | "::1" | "0.0.0.0") || host == sh.ctr.hostname {
        return Some(sh.ctr.ip.clone());
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Some(host.to_string());
    }
    sh.net
        .resolve(&sh.ctr.namespace, host)
        .and_then(|r| r.ips.first().cloned())
}

/// Whether a stand-in of `protocol` (any, when `None`) listens on `host:port`.
fn reachable(sh: &mut Shell<'_>, host: &str, port: u16, protocol: Option<Protocol>) -> bool {
    let Some(ip) = address(sh, host) else { return false };
    sh.net
        .server(&ip, port)
        .is_some_and(|s| protocol.is_none_or(|p| s.standin.protocol == p))
}

fn nslookup(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let Some(name) = a.get(1).filter(|n| !n.starts_with('-')) else {
        sh.eprint(io, "Usage: nslookup HOST [DNS_SERVER]\n");
        return Ok(1);
    };
    let found = sh.net.resolve(&sh.ctr.namespace, name);
    match found {
        Some(r) if !r.ips.is_empty() => {
            let mut out = format!("\nName:      {name}\n");
            for (k, ip) in r.ips.iter().enumerate() {
                out.push_str(&format!("Address {}: {ip} {}\n", k + 1, r.canonical));
            }
            sh.print(io, out);
            Ok(0)
        }
        _ => {
            sh.print(io, "\n");
            sh.eprint(
                io,
                format!("nslookup: can't resolve '{name}': Name does not resolve\n"),
            );
            Ok(1)
        }
    }
}

fn nc(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "wqWsip");
    if args.has('u') || args.has('l') {
        sh.eprint(io, "kudo-sim: nc: not simulated: listening and UDP (-l, -u)\n");
        return Ok(127);
    }
    let [host, port] = args.operands.as_slice() else {
        sh.eprint(io, "usage: nc [-zv] [-w timeout] host port\n");
        return Ok(1);
    };
    let Ok(port) = port.parse::<u16>() else {
        sh.eprint(io, format!("nc: port number invalid: {port}\n"));
        return Ok(1);
    };
    if !reachable(sh, host, port, None) {
        if args.has('v') || address(sh, host).is_none() {
            let why = if address(sh, host).is_none() {
                "Name or service not known"
            } else {
                "Connection refused"
            };
            sh.eprint(
                io,
                format!("nc: connect to {host} port {port} (tcp) failed: {why}\n"),
            );
        }
        return Ok(1);
    }
    if args.has('v') {
        sh.eprint(
            io,
            format!("Connection to {host} {port} port [tcp/*] succeeded!\n"),
        );
    }
    if args.has('z') {
        return Ok(0);
    }
    let request = String::from_utf8_lossy(&io.input.borrow_mut().rest()).into_owned();
    let ip = address(sh, host).unwrap_or_default();
    let answer = match sh.net.server(&ip, port) {
        Some(s) => match s.standin.protocol {
            Protocol::ZooKeeper => four_letter_word(request.trim(), s),
            Protocol::Redis if request.trim().eq_ignore_ascii_case("ping") => "+PONG\r\n".into(),
            _ => String::new(),
        },
        None => String::new(),
    };
    sh.print(io, answer);
    Ok(0)
}

fn four_letter_word(word: &str, s: &crate::shell::standins::Server) -> String {
    match word {
        "ruok" => "imok".into(),
        "srvr" | "stat" => format!(
            "Zookeeper version: 3.6.2 (simulated by kudo-sim for pod {})\nLatency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 1\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: standalone\nNode count: {}\n",
            s.pod,
            match &s.data {
                Data::ZooKeeper(z) => z.len() + 1,
                _ => 1,
            }
        ),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------- zkCli.sh

fn zkcli(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut servers = "localhost:2181".to_string();
    let mut rest = &a[1..];
    if rest.first().map(String::as_str) == Some("-server") {
        servers = rest.get(1).cloned().unwrap_or_default();
        rest = rest.get(2..).unwrap_or(&[]);
    }
    sh.print(io, format!("Connecting to {servers}\n"));
    let target = servers.split(',').find_map(|hp| {
        let (h, p) = hp.rsplit_once(':').unwrap_or((hp, "2181"));
        let port = p.parse::<u16>().ok()?;
        reachable(sh, h, port, Some(Protocol::ZooKeeper)).then(|| (address(sh, h).unwrap_or_default(), port))
    });
    let Some((ip, port)) = target else {
        let path = rest.get(1).cloned().unwrap_or_else(|| "/".into());
        sh.eprint(io, format!("KeeperErrorCode = ConnectionLoss for {path}\n"));
        return Ok(1);
    };
    if rest.is_empty() {
        sh.eprint(io, "kudo-sim: zkCli.sh: not simulated: the interactive prompt\n");
        return Ok(127);
    }
    sh.print(
        io,
        "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\n",
    );
    let Some(Data::ZooKeeper(tree)) = sh.net.server(&ip, port).map(|s| &mut s.data) else {
        return Ok(1);
    };
    let (out, err, st) = zk_command(tree, rest);
    sh.print(io, out);
    sh.eprint(io, err);
    Ok(st)
}

/// One zkCli command on a znode tree: `(stdout, stderr, status)`.
fn zk_command(
    tree: &mut std::collections::BTreeMap<String, Vec<u8>>,
    cmd: &[String],
) -> (String, String, i32) {
    let path = cmd.get(1).cloned().unwrap_or_default();
    let exists = |t: &std::collections::BTreeMap<String, Vec<u8>>, p: &str| p == "/" || t.contains_key(p);
    let parent = |p: &str| crate::shell::fs::parent(p).to_string();
    let no_node = || (String::new(), format!("Node does not exist: {path}\n"), 1);
    match cmd[0].as_str() {
        "ls" => {
            if !exists(tree, &path) {
                return no_node();
            }
            let prefix = if path == "/" {
                "/".to_string()
            } else {
                format!("{path}/")
            };
            let kids: Vec<&str> = tree
                .keys()
                .filter_map(|k| {
                    k.strip_prefix(&prefix)
                        .filter(|r| !r.is_empty() && !r.contains('/'))
                })
                .collect();
            (format!("[{}]\n", kids.join(", ")), String::new(), 0)
        }
        "get" => match tree.get(&path) {
            Some(d) => (format!("{}\n", String::from_utf8_lossy(d)), String::new(), 0),
            None if path == "/" => ("\n".into(), String::new(), 0),
            None => no_node(),
        },
        "create" => {
            if exists(tree, &path) {
                return (String::new(), format!("Node already exists: {path}\n"), 1);
            }
            if !exists(tree, &parent(&path)) {
                return (String::new(), format!("Node does not exist: {path}\n"), 1);
            }
            tree.insert(path.clone(), cmd.get(2).cloned().unwrap_or_default().into_bytes());
            (format!("Created {path}\n"), String::new(), 0)
        }
        "delete" => match tree.remove(&path) {
            Some(_) => (String::new(), String::new(), 0),
            None => no_node(),
        },
        other => (
            String::new(),
            format!("kudo-sim: zkCli.sh {other}: not simulated: ls, get, create and delete are\n"),
            127,
        ),
    }
}

// ---------------------------------------------------------------------- redis-cli

fn redis_cli(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut host = "127.0.0.1".to_string();
    let mut port = 6379u16;
    let mut i = 1;
    let mut words = Vec::new();
    let mut cluster: Option<Vec<String>> = None;
    while i < a.len() {
        match a[i].as_str() {
            "-h" => {
                host = a.get(i + 1).cloned().unwrap_or_default();
                i += 1;
            }
            "-p" => {
                port = a.get(i + 1).and_then(|p| p.parse().ok()).unwrap_or(6379);
                i += 1;
            }
            "-a" | "-n" | "--user" | "--pass" => i += 1,
            "-c" | "-x" | "--no-auth-warning" | "--raw" => {}
            "--cluster" => {
                cluster = Some(a[i + 1..].to_vec());
                break;
            }
            w => words.push(w.to_string()),
        }
        i += 1;
    }
    if let Some(args) = cluster {
        return redis_cluster(sh, io, &args);
    }
    if words.is_empty() {
        sh.eprint(io, "kudo-sim: redis-cli: not simulated: the interactive prompt\n");
        return Ok(127);
    }
    let Some(ip) = address(sh, &host).filter(|ip| {
        sh.net
            .server(ip, port)
            .is_some_and(|s| s.standin.protocol == Protocol::Redis)
    }) else {
        sh.print(
            io,
            format!("Could not connect to Redis at {host}:{port}: Connection refused\n"),
        );
        return Ok(1);
    };
    let Some(Data::Redis(r)) = sh.net.server(&ip, port).map(|s| &mut s.data) else {
        return Ok(1);
    };
    let (out, st) = redis_command(r, &words);
    sh.print(io, out);
    Ok(st)
}

fn redis_command(r: &mut RedisData, w: &[String]) -> (String, i32) {
    let upper: Vec<String> = w.iter().map(|s| s.to_ascii_uppercase()).collect();
    match upper.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["PING"] => ("PONG\n".into(), 0),
        ["SET", ..] if w.len() == 3 => {
            r.keys.insert(w[1].clone(), w[2].clone());
            ("OK\n".into(), 0)
        }
        ["GET", ..] if w.len() == 2 => (r.keys.get(&w[1]).map_or("\n".into(), |v| format!("{v}\n")), 0),
        ["DEL", ..] => {
            let n = w[1..].iter().filter(|k| r.keys.remove(*k).is_some()).count();
            (format!("(integer) {n}\n"), 0)
        }
        ["CLUSTER", "INFO"] => {
            let (state, known, size) = if r.cluster.is_empty() {
                ("fail", 1, 0)
            } else {
                ("ok", r.cluster.len(), r.masters)
            };
            let slots = if r.cluster.is_empty() { 0 } else { 16384 };
            (
                format!(
                    "cluster_state:{state}\r\ncluster_slots_assigned:{slots}\r\ncluster_slots_ok:{slots}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\ncluster_size:{size}\r\n"
                ),
                0,
            )
        }
        ["CLUSTER", "NODES"] => {
            let lines: String = r
                .cluster
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    format!(
                        "{:040x} {n}@1{} {} - 0 0 {} connected\n",
                        k + 1,
                        n.rsplit(':').next().unwrap_or(""),
                        if k < r.masters { "master" } else { "slave" },
                        k + 1
                    )
                })
                .collect();
            (lines, 0)
        }
        _ => (
            format!(
                "(error) ERR kudo-sim's simulated Redis does not run {:?}\n",
                w.join(" ")
            ),
            1,
        ),
    }
}

/// The arguments of `--cluster create`: nodes, replicas per master, `--cluster-yes`.
fn cluster_args(args: &[String]) -> (Vec<String>, usize, bool) {
    let mut replicas = 0usize;
    let mut yes = false;
    let mut nodes = Vec::new();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--cluster-replicas" => {
                replicas = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
                i += 1;
            }
            "--cluster-yes" => yes = true,
            n => nodes.push(n.to_string()),
        }
        i += 1;
    }
    (nodes, replicas, yes)
}

/// Why the nodes cannot make a cluster (the message redis-cli prints), if they cannot.
fn cluster_refusal(sh: &mut Shell<'_>, nodes: &[String], replicas: usize) -> Option<String> {
    for n in nodes {
        let ok = n
            .rsplit_once(':')
            .is_some_and(|(h, p)| h.parse::<std::net::Ipv4Addr>().is_ok() && p.parse::<u16>().is_ok());
        if !ok {
            return Some(format!("Invalid node address specified: {n}\n"));
        }
    }
    for n in nodes {
        let (h, p) = n.rsplit_once(':').unwrap_or_default();
        if !reachable(sh, h, p.parse().unwrap_or(0), Some(Protocol::Redis)) {
            return Some(format!("Could not connect to Redis at {n}: Connection refused\n"));
        }
    }
    (nodes.len() / (replicas + 1) < 3).then(|| {
        format!(
            "*** ERROR: Invalid configuration for cluster creation.\n*** Redis Cluster requires at least 3 master nodes.\n*** This is not possible with {} nodes and {replicas} replicas per node.\n*** At least {} nodes are required.\n",
            nodes.len(),
            3 * (replicas + 1)
        )
    })
}

/// `redis-cli --cluster create IP:PORT… [--cluster-replicas N] [--cluster-yes]`.
fn redis_cluster(sh: &mut Shell<'_>, io: &Io, args: &[String]) -> Result<i32, Flow> {
    if args.first().map(String::as_str) != Some("create") {
        let sub = args.first().cloned().unwrap_or_default();
        sh.eprint(
            io,
            format!("kudo-sim: redis-cli --cluster {sub}: not simulated: only create is\n"),
        );
        return Ok(127);
    }
    let (nodes, replicas, yes) = cluster_args(args);
    if let Some(why) = cluster_refusal(sh, &nodes, replicas) {
        sh.print(io, why);
        return Ok(1);
    }
    let masters = nodes.len() / (replicas + 1);
    let mut out = format!(
        ">>> Performing hash slots allocation on {} nodes...\n",
        nodes.len()
    );
    for k in 0..masters {
        out.push_str(&format!(
            "Master[{k}] -> Slots {} - {}\n",
            k * 16384 / masters,
            (k + 1) * 16384 / masters - 1
        ));
    }
    for (k, n) in nodes.iter().enumerate().skip(masters) {
        out.push_str(&format!("Adding replica {n} to {}\n", nodes[k % masters]));
    }
    out.push_str("Can I set the above configuration? (type 'yes' to accept): ");
    sh.print(io, out);
    let answer = io
        .input
        .borrow_mut()
        .line()
        .map(|(l, _)| String::from_utf8_lossy(&l).into_owned());
    if !yes && answer.as_deref().map(str::trim) != Some("yes") {
        return Ok(1);
    }
    for n in &nodes {
        let (h, p) = n.rsplit_once(':').unwrap_or_default();
        if let Some(s) = sh.net.server(h, p.parse().unwrap_or(0))
            && let Data::Redis(r) = &mut s.data
        {
            if !r.cluster.is_empty() || !r.keys.is_empty() {
                let msg = format!(
                    "\n[ERR] Node {n} is not empty. Either the node already knows other nodes (check with CLUSTER NODES) or contains some key in database 0.\n"
                );
                sh.print(io, msg);
                return Ok(1);
            }
            r.cluster = nodes.clone();
            r.masters = masters;
        }
    }
    sh.print(io, "\n>>> Nodes configuration updated\n>>> Assign a different config epoch to each node\n>>> Sending CLUSTER MEET messages to join the cluster\nWaiting for the cluster to join\n\n[OK] All nodes agree about slots configuration.\n>>> Check for open slots...\n>>> Check slots coverage...\n[OK] All 16384 slots covered.\n");
    Ok(0)
}

// ---------------------------------------------------------------------- mysql / mysqldump

/// Host, port and the rest of a MySQL client's command line.
struct MyArgs {
    host: String,
    port: u16,
    execute: Option<String>,
    skip_names: bool,
    database: Option<String>,
    rest: Vec<String>,
}

fn my_args(a: &[String]) -> MyArgs {
    let mut m = MyArgs {
        host: "localhost".into(),
        port: 3306,
        execute: None,
        skip_names: false,
        database: None,
        rest: Vec::new(),
    };
    let mut i = 1;
    while i < a.len() {
        let s = a[i].as_str();
        let value = |i: &mut usize| {
            *i += 1;
            a.get(*i).cloned().unwrap_or_default()
        };
        match s {
            "-h" | "--host" => m.host = value(&mut i),
            "-P" | "--port" => m.port = value(&mut i).parse().unwrap_or(3306),
            "-u" | "--user" | "-S" | "--socket" => {
                value(&mut i);
            }
            "-e" | "--execute" => m.execute = Some(value(&mut i)),
            "-D" | "--database" => m.database = Some(value(&mut i)),
            "-N" | "--skip-column-names" => m.skip_names = true,
            _ if s.starts_with("--host=") => m.host = s[7..].to_string(),
            _ if s.starts_with("--port=") => m.port = s[7..].parse().unwrap_or(3306),
            _ if s.starts_with("-h") && s.len() > 2 => m.host = s[2..].to_string(),
            _ if s.starts_with("-u")
                || s.starts_with("-p")
                || s.starts_with("--password")
                || s.starts_with("--user=") => {}
            _ if s.starts_with('-') => m.rest.push(s.to_string()),
            _ => m.rest.push(s.to_string()),
        }
        i += 1;
    }
    m
}

/// The MySQL stand-in behind `host:port`, or the client's error message.
fn my_connect(sh: &mut Shell<'_>, host: &str, port: u16) -> Result<String, String> {
    let Some(ip) = address(sh, host) else {
        return Err(format!("ERROR 2005 (HY000): Unknown server host '{host}' (-2)"));
    };
    if sh
        .net
        .server(&ip, port)
        .is_some_and(|s| s.standin.protocol == Protocol::MySql)
    {
        Ok(ip)
    } else {
        Err(format!(
            "ERROR 2002 (HY000): Can't connect to server on '{host}' (115)"
        ))
    }
}

/// Statements of a SQL text: comments removed, `/*! … */` kept as statements, split at `;`.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut it = sql.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '-' if it.peek() == Some(&'-') => {
                for d in it.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '#' => {
                for d in it.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            ';' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Runs one statement on a simulated server's databases: its output, or its error.
fn sql(
    dbs: &mut std::collections::BTreeSet<String>,
    current: &mut Option<String>,
    stmt: &str,
    names: bool,
) -> Result<String, String> {
    let s = stmt.trim_start_matches("/*!").trim_end_matches("*/").trim();
    let s = s.trim_start_matches(|c: char| c.is_ascii_digit()).trim();
    let words: Vec<String> = s
        .split_whitespace()
        .map(|w| w.trim_matches('`').to_string())
        .collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let up: Vec<&str> = upper.iter().map(String::as_str).collect();
    let name = |k: usize| words.get(k).cloned().unwrap_or_default();
    match up.as_slice() {
        ["SHOW", "DATABASES"] => {
            let mut out = if names {
                "Database\n".to_string()
            } else {
                String::new()
            };
            for d in dbs.iter() {
                out.push_str(d);
                out.push('\n');
            }
            Ok(out)
        }
        ["CREATE", "DATABASE", "IF", "NOT", "EXISTS", ..]
        | ["CREATE", "DATABASE", "/*!32312", "IF", "NOT", "EXISTS*/", ..] => {
            dbs.insert(name(up.len() - 1));
            Ok(String::new())
        }
        ["CREATE", "DATABASE", _] => {
            if !dbs.insert(name(2)) {
                return Err(format!(
                    "ERROR 1007 (HY000): Can't create database '{}'; database exists",
                    name(2)
                ));
            }
            Ok(String::new())
        }
        ["DROP", "DATABASE", "IF", "EXISTS", _] => {
            dbs.remove(&name(4));
            Ok(String::new())
        }
        ["DROP", "DATABASE", _] => match dbs.remove(&name(2)) {
            true => Ok(String::new()),
            false => Err(format!(
                "ERROR 1008 (HY000): Can't drop database '{}'; database doesn't exist",
                name(2)
            )),
        },
        ["USE", _] => {
            if !dbs.contains(&name(1)) {
                return Err(format!("ERROR 1049 (42000): Unknown database '{}'", name(1)));
            }
            *current = Some(name(1));
            Ok(String::new())
        }
        ["SELECT", "1"] => Ok(if names { "1\n1\n".into() } else { "1\n".into() }),
        ["SET", ..] => Ok(String::new()),
        _ => Err(format!(
            "ERROR 1064 (42000): kudo-sim's simulated MySQL/MariaDB does not run {s:?} (it runs SHOW DATABASES, CREATE/DROP DATABASE, USE, SELECT 1 and SET)"
        )),
    }
}

fn mysql(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let m = my_args(a);
    let ip = match my_connect(sh, &m.host, m.port) {
        Ok(ip) => ip,
        Err(e) => {
            sh.eprint(io, format!("{e}\n"));
            return Ok(1);
        }
    };
    let text = match &m.execute {
        Some(e) => e.clone(),
        None => String::from_utf8_lossy(&io.input.borrow_mut().rest()).into_owned(),
    };
    let mut current = m
        .database
        .clone()
        .or_else(|| m.rest.iter().find(|r| !r.starts_with('-')).cloned());
    let mut out = String::new();
    let mut err = None;
    if let Some(Data::MySql(dbs)) = sh.net.server(&ip, m.port).map(|s| &mut s.data) {
        for st in statements(&text) {
            match sql(dbs, &mut current, &st, !m.skip_names) {
                Ok(o) => out.push_str(&o),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
    }
    sh.print(io, out);
    match err {
        Some(e) => {
            sh.eprint(io, format!("{e}\n"));
            Ok(1)
        }
        None => Ok(0),
    }
}

fn mysqldump(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let m = my_args(a);
    let ip = match my_connect(sh, &m.host, m.port) {
        Ok(ip) => ip,
        Err(e) => {
            sh.eprint(
                io,
                format!(
                    "mysqldump: Got error: {} when trying to connect\n",
                    e.trim_start_matches("ERROR ")
                ),
            );
            return Ok(2);
        }
    };
    let all = m.rest.iter().any(|r| r == "--all-databases" || r == "-A");
    let wanted: Vec<String> = m.rest.iter().filter(|r| !r.starts_with('-')).cloned().collect();
    let Some(Data::MySql(dbs)) = sh.net.server(&ip, m.port).map(|s| s.data.clone()) else {
        return Ok(2);
    };
    let system = ["information_schema", "mysql", "performance_schema", "sys"];
    let chosen: Vec<String> = if all {
        dbs.iter()
            .filter(|d| !system.contains(&d.as_str()))
            .cloned()
            .collect()
    } else {
        wanted
    };
    let mut out = format!(
        "-- kudo-sim: a dump of the simulated MySQL/MariaDB at {}:{}\n",
        m.host, m.port
    );
    for d in &chosen {
        if !dbs.contains(d) {
            sh.print(io, out);
            sh.eprint(
                io,
                format!(
                    "mysqldump: Got error: 1049: \"Unknown database '{d}'\" when selecting the database\n"
                ),
            );
            return Ok(2);
        }
        out.push_str(&format!(
            "CREATE DATABASE /*!32312 IF NOT EXISTS*/ `{d}`;\nUSE `{d}`;\n"
        ));
    }
    sh.print(io, out);
    Ok(0)
}
