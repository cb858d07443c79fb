//! The interpreter and its programs, on a pod's filesystem and a small simulated network.

use std::collections::{BTreeMap, HashMap};

use super::standins::{Data, Protocol, Server, StandIn};
use super::*;

fn ctr(name: &str, mounts: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        image: "busybox".into(),
        mounts: mounts
            .iter()
            .map(|(p, v)| Mount {
                path: p.to_string(),
                volume: v.to_string(),
                read_only: false,
                source: "emptyDir".into(),
                sub_path: String::new(),
            })
            .collect(),
        env: BTreeMap::from([("GREETING".to_string(), "hello".to_string())]),
        hostname: "box-0".into(),
        namespace: "ns".into(),
        pod: "box-0".into(),
        ip: "10.244.0.9".into(),
        started_ms: 1_700_000_000_000,
        ..Container::default()
    }
}

/// Names and servers for the clients.
#[derive(Default)]
struct Net {
    names: HashMap<String, Vec<String>>,
    servers: HashMap<(String, u16), Server>,
}

impl Net {
    fn with(mut self, name: &str, ip: &str, protocol: Protocol, port: u16) -> Self {
        self.names
            .entry(name.to_string())
            .or_default()
            .push(ip.to_string());
        let standin = StandIn {
            server: "test",
            protocol,
            program: "test".into(),
            ports: vec![port],
        };
        let c = ctr(name, &[]);
        self.servers
            .insert((ip.to_string(), port), Server::new(standin, &c));
        self
    }
}

impl Network for Net {
    fn resolve(&self, ns: &str, name: &str) -> Option<Resolved> {
        let ips = self.names.get(name)?.clone();
        Some(Resolved {
            canonical: format!("{name}.{ns}.svc.cluster.local"),
            ips,
        })
    }
    fn server(&mut self, ip: &str, port: u16) -> Option<&mut Server> {
        self.servers.get_mut(&(ip.to_string(), port))
    }
}

fn sh(fs: &mut PodFs, c: &Container, script: &str) -> Run {
    run(
        fs,
        c,
        &mut NoNetwork,
        &["/bin/sh".into(), "-c".into(), script.into()],
        b"",
    )
}

fn out(r: &Run) -> String {
    String::from_utf8_lossy(&r.stdout).into_owned()
}

fn err(r: &Run) -> String {
    String::from_utf8_lossy(&r.stderr).into_owned()
}

#[test]
fn exit_codes_and_lists() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[]);
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        run(&mut fs, &c, &mut NoNetwork, &argv(&["false"]), b"").exit,
        Some(1)
    );
    assert_eq!(
        run(&mut fs, &c, &mut NoNetwork, &argv(&["/bin/true"]), b"").exit,
        Some(0)
    );
    assert_eq!(sh(&mut fs, &c, "exit 3").exit, Some(3));
    assert_eq!(sh(&mut fs, &c, " exit 300 ").exit, Some(44));
    assert_eq!(sh(&mut fs, &c, "false || echo recovered").exit, Some(0));
    assert_eq!(sh(&mut fs, &c, "false && echo no").exit, Some(1));
    assert_eq!(sh(&mut fs, &c, "false; true").exit, Some(0));
    assert_eq!(
        run(
            &mut fs,
            &c,
            &mut NoNetwork,
            &argv(&["sh", "-ec", "false; true"]),
            b""
        )
        .exit,
        Some(1)
    );
    assert_eq!(sh(&mut fs, &c, "set -e; false && true; exit 4").exit, Some(4));
    assert_eq!(
        sh(&mut fs, &c, "set -e; if false; then :; fi; ! true; exit 5").exit,
        Some(5)
    );
    let r = sh(
        &mut fs,
        &c,
        "echo $GREETING \"${GREETING} world\" 'no $GREETING'; echo err >&2",
    );
    assert_eq!(out(&r), "hello hello world no $GREETING\n");
    assert_eq!(err(&r), "err\n");
}

#[test]
fn a_program_kudo_sim_does_not_implement_exits_127_and_the_script_goes_on() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[]);
    let r = sh(&mut fs, &c, "echo start; frobnicate --now; echo after $?");
    assert_eq!(r.exit, Some(0));
    assert_eq!(out(&r), "start\nafter 127\n");
    assert!(
        err(&r).starts_with("kudo-sim: frobnicate: not simulated: "),
        "{}",
        err(&r)
    );
    let r = run(&mut fs, &c, &mut NoNetwork, &["frobnicate".into()], b"");
    assert_eq!(r.exit, Some(127));
    let r = sh(&mut fs, &c, "set -e; frobnicate; echo never");
    assert_eq!((r.exit, out(&r)), (Some(127), String::new()));
    let r = sh(&mut fs, &c, "kubectl get pods");
    assert_eq!(r.exit, Some(127));
    assert!(err(&r).contains("reaches no API server"), "{}", err(&r));
    // A script the interpreter does not interpret is not run at all.
    let r = sh(&mut fs, &c, "cat <<EOF\nx\nEOF\n");
    assert_eq!(r.exit, Some(127));
    assert!(err(&r).contains("here-documents"), "{}", err(&r));
    // The image's entrypoint of a container that must finish is not simulated.
    let mut job = ctr("j", &[]);
    job.image = "example.com/tool:1".into();
    assert_eq!(run(&mut fs, &job, &mut NoNetwork, &[], b"").exit, Some(127));
    // busybox's default command is a shell reading an empty stdin: it ends at once.
    assert_eq!(run(&mut fs, &c, &mut NoNetwork, &[], b"").exit, Some(0));
}

#[test]
fn the_shell_language() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[]);
    let cases = [
        (
            "i=0; while [ $i -lt 3 ]; do printf '%s,' $i; i=$((i+1)); done; echo",
            "0,1,2,\n",
        ),
        (
            "until [ ${n:-0} -ge 2 ]; do n=$((${n:-0}+1)); done; echo $n",
            "2\n",
        ),
        ("for x in a b 'c d'; do echo \"[$x]\"; done", "[a]\n[b]\n[c d]\n"),
        (
            "case kafka-2 in *-[0-9]) echo ordinal ${HOSTNAME##*-};; *) echo no;; esac",
            "ordinal 0\n",
        ),
        (
            "f() { echo \"f:$1:$#\"; return 3; }; f x y; echo $?",
            "f:x:2\n3\n",
        ),
        (
            "echo $(echo inner $(echo nested)) `echo back`",
            "inner nested back\n",
        ),
        ("A=\"a  b\"; set -- $A; echo $#; echo \"$A\"", "2\na  b\n"),
        (
            "echo ${U:-def} ${GREETING:+set} ${GREETING%l*} ${GREETING/l/L} ${GREETING:1:3} ${#GREETING}",
            "def set hel heLlo ell 5\n",
        ),
        (
            "echo one two | tr a-z A-Z | { read a b; echo $b-$a; }",
            "TWO-ONE\n",
        ),
        ("[[ $GREETING == h* && -n x ]] && echo match", "match\n"),
        ("(( 2 ** 3 == 8 )) && echo pow", "pow\n"),
        ("x=1; (x=2; echo $x); echo $x", "2\n1\n"),
        ("printf '%05d|%-4s|%x\\n' 42 ab 255", "00042|ab  |ff\n"),
        ("echo a > /tmp/f; echo b >> /tmp/f; cat < /tmp/f | wc -l", "2\n"),
        ("cat <<< 'here string'", "here string\n"),
        (
            "echo x 2>&1 >/dev/null; echo err 2>/dev/null >&2; echo done",
            "done\n",
        ),
        ("{ echo out; echo err >&2; } 2>&1 | wc -l", "2\n"),
        ("true & echo bg", "bg\n"),
    ];
    for (script, want) in cases {
        let r = sh(&mut fs, &c, script);
        assert_eq!(out(&r), want, "{script}\nstderr: {}", err(&r));
    }
}

#[test]
fn set_x_traces_and_files_are_shared_through_volumes() {
    let mut fs = PodFs::default();
    let init = ctr("init", &[("/datadir", "data")]);
    let r = sh(
        &mut fs,
        &init,
        "set -x; if [ ! -d /datadir/mysql ]; then mkdir /datadir/mysql; fi",
    );
    assert_eq!(r.exit, Some(0), "{}", err(&r));
    assert_eq!(err(&r), "+ [ ! -d /datadir/mysql ]\n+ mkdir /datadir/mysql\n");
    let main = ctr("main", &[("/var/lib/mysql", "data")]);
    let r = run(
        &mut fs,
        &main,
        &mut NoNetwork,
        &["ls".into(), "/var/lib/mysql".into()],
        b"",
    );
    assert_eq!(out(&r), "mysql\n");
    let r = sh(&mut fs, &main, "cat /datadir/x");
    assert_eq!(err(&r), "cat: /datadir/x: No such file or directory\n");
    let r = sh(
        &mut fs,
        &init,
        "touch /datadir/f && chown -R 1000:1000 /datadir && stat -c '%u:%g %s' /datadir/f && sysctl -w vm.max_map_count=262144",
    );
    assert_eq!(out(&r), "1000:1000 0\nvm.max_map_count = 262144\n", "{}", err(&r));
}

#[test]
fn sleep_adds_up_and_a_process_past_the_hour_keeps_running() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[]);
    let r = run(
        &mut fs,
        &c,
        &mut NoNetwork,
        &["sleep".into(), "1.5".into(), "2m".into()],
        b"",
    );
    assert_eq!((r.exit, r.sleep_ms), (Some(0), 121_500));
    let r = sh(&mut fs, &c, "sleep infinity");
    assert_eq!(r.exit, None);
    assert!(matches!(r.running, Some(Running::Waiting(_))));
    let r = sh(&mut fs, &c, "until false; do sleep 5; done");
    assert_eq!(
        r.exit, None,
        "a loop waiting for what never happens runs until stopped"
    );
    let r = sh(&mut fs, &c, "sleep x");
    assert_eq!(
        (r.exit, err(&r)),
        (Some(1), "sleep: invalid time interval 'x'\n".to_string())
    );
}

#[test]
fn tar_archives_and_extracts_files() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[("/tmp", "v")]);
    sh(&mut fs, &c, "echo secret > /tmp/tls.crt");
    let r = run(
        &mut fs,
        &c,
        &mut NoNetwork,
        &["tar".into(), "cf".into(), "-".into(), "/tmp/tls.crt".into()],
        b"",
    );
    assert_eq!(r.exit, Some(0));
    assert_eq!(err(&r), "tar: Removing leading `/' from member names\n");
    let archive = r.stdout.clone();
    let mut a = ::tar::Archive::new(archive.as_slice());
    let names: Vec<String> = a
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["tmp/tls.crt"]);
    let other = ctr("o", &[]);
    let r = run(
        &mut fs,
        &other,
        &mut NoNetwork,
        &["tar".into(), "xf".into(), "-".into(), "-C".into(), "/opt".into()],
        &archive,
    );
    assert_eq!(r.exit, Some(0), "{}", err(&r));
    assert_eq!(out(&sh(&mut fs, &other, "cat /opt/tmp/tls.crt")), "secret\n");
}

#[test]
fn openssl_writes_a_key_and_a_self_signed_certificate() {
    use x509_cert::der::DecodePem;
    let mut fs = PodFs::default();
    let c = ctr("init", &[("/tmp", "cert-out")]);
    let r = sh(
        &mut fs,
        &c,
        "openssl req -x509 -newkey rsa:2048 -sha256 -nodes -keyout /tmp/tls.key -out /tmp/tls.crt -subj \"/CN=KudoKafkaCA\" -days 365",
    );
    assert_eq!(r.exit, Some(0), "{}", err(&r));
    let key = String::from_utf8(sh(&mut fs, &c, "cat /tmp/tls.key").stdout).unwrap();
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{key}");
    let pem = String::from_utf8(sh(&mut fs, &c, "cat /tmp/tls.crt").stdout).unwrap();
    let cert = x509_cert::Certificate::from_pem(&pem).expect("a certificate");
    assert_eq!(cert.tbs_certificate.subject.to_string(), "CN=KudoKafkaCA");
    assert_eq!(cert.tbs_certificate.issuer, cert.tbs_certificate.subject);
    let v = &cert.tbs_certificate.validity;
    let days = (v.not_after.to_unix_duration() - v.not_before.to_unix_duration()).as_secs() / 86_400;
    assert_eq!(days, 365);
    assert_eq!(v.not_before.to_unix_duration().as_secs(), 1_700_000_000);
    let r = sh(
        &mut fs,
        &c,
        "openssl req -x509 -newkey rsa:2048 -keyout /tmp/k -out /tmp/c -subj /CN=x",
    );
    assert_eq!(r.exit, Some(1), "without -nodes OpenSSL asks for a pass phrase");
    let r = sh(&mut fs, &c, "openssl s_client -connect x:443");
    assert_eq!(r.exit, Some(127));
}

#[test]
fn long_running_containers_of_known_images_stand_in_for_their_server() {
    let mut fs = PodFs::default();
    let mut zk = ctr("zk", &[]);
    zk.image = "zookeeper:3.6.2".into();
    zk.long_running = true;
    zk.ports = vec![2181];
    let r = sh(
        &mut fs,
        &zk,
        "ZOOKEEPERPATH=`pwd` /etc/zookeeper/bootstrap.sh --servers=3",
    );
    assert_eq!(r.exit, None);
    let s = r.serving().expect("a stand-in");
    assert_eq!((s.server, s.ports.clone()), ("ZooKeeper", vec![2181]));
    // The same in an init container must finish: it is not simulated.
    zk.long_running = false;
    assert_eq!(sh(&mut fs, &zk, "/etc/zookeeper/bootstrap.sh").exit, Some(127));
    // A server program reached by exec, whatever the image.
    let c = ctr("k", &[]);
    let r = sh(
        &mut fs,
        &c,
        "echo starting; KAFKA_OPTS=x exec /opt/kafka/bin/kafka-server-start.sh /cfg",
    );
    assert_eq!((r.exit, out(&r)), (None, "starting\n".to_string()));
    assert_eq!(r.serving().unwrap().server, "Kafka broker");
}

#[test]
fn clients_reach_the_stand_ins_on_the_network() {
    let mut fs = PodFs::default();
    let c = ctr("job", &[]);
    let mut net = Net::default().with("zk-0.zk", "10.244.0.2", Protocol::ZooKeeper, 2181);
    for i in 0..6 {
        net = net.with(
            &format!("r-{i}.svc"),
            &format!("10.244.1.{}", 10 + i),
            Protocol::Redis,
            6379,
        );
    }
    net =
        net.with("svc", "10.96.0.20", Protocol::Redis, 6379)
            .with("db", "10.96.0.30", Protocol::MySql, 3306);
    let mut script = |s: &str| {
        run(
            &mut fs,
            &c,
            &mut net,
            &["/bin/sh".into(), "-c".into(), s.into()],
            b"",
        )
    };
    let r = script("until zkCli.sh -server zk-0.zk:2181,nowhere:2181 ls /; do sleep 5; done");
    assert_eq!(r.exit, Some(0), "{}", err(&r));
    assert!(out(&r).ends_with("[zookeeper]\n"), "{}", out(&r));
    let r = script("nslookup r-0.svc");
    assert_eq!(
        out(&r),
        "\nName:      r-0.svc\nAddress 1: 10.244.1.10 r-0.svc.ns.svc.cluster.local\n"
    );
    let r = script("nslookup missing");
    assert_eq!(
        (r.exit, err(&r)),
        (
            Some(1),
            "nslookup: can't resolve 'missing': Name does not resolve\n".to_string()
        )
    );
    let r = script(
        "echo yes | redis-cli -x -h svc --cluster create --cluster-replicas 1 $(i=0; while [ $i -lt 6 ]; do printf $(nslookup r-${i}.svc | grep \"Address\" | awk \"{ print \\$3 }\")\":6379 \"; i=$((i+1)); done)",
    );
    assert_eq!(r.exit, Some(0), "{}{}", out(&r), err(&r));
    assert!(out(&r).contains("[OK] All 16384 slots covered."), "{}", out(&r));
    let r = script("redis-cli -h 10.244.1.12 cluster info | grep -E 'cluster_(state|size)'");
    assert_eq!(out(&r), "cluster_state:ok\r\ncluster_size:3\r\n");
    let r = script("nc -z db 3306 && ! nc -z db 3307 && echo ports");
    assert_eq!(out(&r), "ports\n");
    let r = script(
        "mysql -h db -u root -N -B -e 'SHOW DATABASES' | grep -v -x -E 'mysql|information_schema|performance_schema|sys' || echo none",
    );
    assert_eq!(out(&r), "none\n");
    let r = script(
        "mysql -h db -e 'CREATE DATABASE shop' && mysqldump -h db --databases shop > /tmp/d.sql && mysql -h db -e 'DROP DATABASE shop' && mysql -h db < /tmp/d.sql && mysql -h db -N -e 'SHOW DATABASES' | grep shop",
    );
    assert_eq!((r.exit, out(&r)), (Some(0), "shop\n".to_string()), "{}", err(&r));
    let r = script("mysql -h nowhere -e 'SELECT 1'");
    assert_eq!(
        (r.exit, err(&r)),
        (
            Some(1),
            "ERROR 2005 (HY000): Unknown server host 'nowhere' (-2)\n".to_string()
        )
    );
    assert!(
        matches!(&net.servers[&("10.244.1.10".to_string(), 6379)].data, Data::Redis(d) if d.masters == 3)
    );
}

#[test]
fn text_tools() {
    let mut fs = PodFs::default();
    let c = ctr("c", &[]);
    let cases = [
        ("printf 'a\\nb\\nab\\n' | grep -c a", "2\n"),
        ("printf 'x1\\ny2\\n' | grep -E '^(x|z)[0-9]'", "x1\n"),
        ("printf 'x1\\ny2\\n' | grep -v x", "y2\n"),
        ("echo hello world | sed 's/o/0/g'", "hell0 w0rld\n"),
        (
            "echo 'a=1' > /tmp/c; sed -i 's/^a=.*/a=2/' /tmp/c; cat /tmp/c",
            "a=2\n",
        ),
        ("printf 'l1\\nl2\\nl3\\n' | sed -n '2p'", "l2\n"),
        ("echo 'a b c' | awk '{ print $2 }'", "b\n"),
        ("printf '1\\n2\\n3\\n' | awk '{ s += $1 } END { print s }'", "6\n"),
        ("printf 'a\\nb\\n' | xargs echo got", "got a b\n"),
        ("printf '' | xargs -r echo never; echo ok", "ok\n"),
        ("echo a,b,c | cut -d, -f2", "b\n"),
        ("printf 'b\\na\\nb\\n' | sort | uniq -c", "      1 a\n      2 b\n"),
        ("date -u +%Y%m%dT%H%M%SZ", "20231114T221320Z\n"),
        ("echo aGk= | base64 -d", "hi"),
        ("basename /a/b.txt .txt; dirname /a/b.txt", "b\n/a\n"),
    ];
    for (script, want) in cases {
        let r = sh(&mut fs, &c, script);
        assert_eq!(out(&r), want, "{script}\nstderr: {}", err(&r));
    }
}
