//! The long-running programs kudo-sim stands in for, and the programs it knows it cannot run.
//!
//! A simulated node runs no server, but a pod's server must still "run": be ready and answer on
//! its ports to the simulated clients (`nc`, `zkCli.sh`, `redis-cli`, `mysql`). kudo-sim stands in
//! for a container's process when it reaches one of the server programs of [`PROGRAMS`], and,
//! in a long-running container (not an init container, not a Job's or a `restartPolicy: Never`
//! pod's), for the server of an image of [`IMAGES`] from the first program of its command line
//! that kudo-sim does not implement (the scripts that prepare a server's configuration matter
//! only to the real server), or when the container runs its image's entrypoint (any image: what
//! a long-running container of it runs is its server). A stand-in does nothing but run and
//! answer its protocol's basic requests; it is not the real server.
//!
//! [`REFUSED`] lists programs whose work kudo-sim deliberately does not simulate, with the
//! reason they exit with (127), as for any other program it does not implement.

use std::collections::{BTreeMap, BTreeSet};

use super::Container;

/// How a stand-in answers its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// ZooKeeper: the four-letter words (`ruok`, `srvr`, `stat`) and `zkCli.sh`'s znodes.
    ZooKeeper,
    /// A Kafka broker: accepts connections, answers nothing.
    Kafka,
    /// Redis: `PING` and `redis-cli`'s keys and cluster commands.
    Redis,
    /// Cassandra: accepts connections, answers nothing.
    Cassandra,
    /// MySQL: `mysql`'s and `mysqldump`'s databases.
    MySql,
    /// HTTP: every request gets a `200 OK` naming the stand-in.
    Http,
    /// Accepts connections, answers nothing.
    Tcp,
}

/// A kind of server: its name, protocol and usual ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// The server's name (`ZooKeeper`, `Kafka broker`), shown as what a stand-in stands in for.
    pub name: &'static str,
    /// How a stand-in for it answers its clients.
    pub protocol: Protocol,
    /// The ports it usually listens on, when the container declares none.
    pub ports: &'static [u16],
}

const ZOOKEEPER: Kind = Kind {
    name: "ZooKeeper",
    protocol: Protocol::ZooKeeper,
    ports: &[2181, 2888, 3888],
};
const KAFKA: Kind = Kind {
    name: "Kafka broker",
    protocol: Protocol::Kafka,
    ports: &[9092, 9093],
};
const REDIS: Kind = Kind {
    name: "Redis",
    protocol: Protocol::Redis,
    ports: &[6379, 16379],
};
const CASSANDRA: Kind = Kind {
    name: "Cassandra",
    protocol: Protocol::Cassandra,
    ports: &[9042, 7000, 7199],
};
const MYSQL: Kind = Kind {
    name: "MySQL/MariaDB",
    protocol: Protocol::MySql,
    ports: &[3306],
};
const fn http(name: &'static str, ports: &'static [u16]) -> Kind {
    Kind {
        name,
        protocol: Protocol::Http,
        ports,
    }
}
const fn tcp(name: &'static str, ports: &'static [u16]) -> Kind {
    Kind {
        name,
        protocol: Protocol::Tcp,
        ports,
    }
}

/// Images whose server kudo-sim knows, by repository (registry and tag removed; `org/name`, or
/// `name` for the Docker library).
pub const IMAGES: &[(&str, Kind)] = &[
    ("zookeeper", ZOOKEEPER),
    ("bitnami/zookeeper", ZOOKEEPER),
    ("mesosphere/kafka", KAFKA),
    ("shubhanilbag/kafka", KAFKA),
    ("bitnami/kafka", KAFKA),
    ("confluentinc/cp-kafka", KAFKA),
    ("wurstmeister/kafka", KAFKA),
    ("mesosphere/cruise-control", http("Cruise Control", &[9090])),
    ("prometheus/node-exporter", http("node exporter", &[9100])),
    ("prom/node-exporter", http("node exporter", &[9100])),
    ("redis", REDIS),
    ("bitnami/redis", REDIS),
    ("cassandra", CASSANDRA),
    ("mesosphere/cassandra", CASSANDRA),
    (
        "mesosphere/kudo-cassandra-recovery",
        tcp("KUDO Cassandra recovery controller", &[]),
    ),
    ("elasticsearch", http("Elasticsearch", &[9200, 9300])),
    (
        "elasticsearch/elasticsearch",
        http("Elasticsearch", &[9200, 9300]),
    ),
    ("mysql", MYSQL),
    ("mariadb", MYSQL),
    ("bitnami/mariadb", MYSQL),
    ("percona", MYSQL),
    ("nginx", http("nginx", &[80])),
    ("httpd", http("Apache httpd", &[80])),
    ("wordpress", http("WordPress on Apache", &[80])),
    ("postgres", tcp("PostgreSQL", &[5432])),
];

/// Server programs, by name: `(program, argument it needs to stay in the foreground, kind)`.
pub const PROGRAMS: &[(&str, Option<&str>, Kind)] = &[
    ("zkServer.sh", Some("start-foreground"), ZOOKEEPER),
    ("kafka-server-start.sh", None, KAFKA),
    ("connect-distributed.sh", None, http("Kafka Connect", &[8083])),
    ("kafka-mirror-maker.sh", None, tcp("Kafka MirrorMaker", &[])),
    ("redis-server", None, REDIS),
    ("cassandra", None, CASSANDRA),
    ("elasticsearch", None, http("Elasticsearch", &[9200, 9300])),
    ("mysqld", None, MYSQL),
    ("mariadbd", None, MYSQL),
    ("nginx", None, http("nginx", &[80])),
    ("httpd", None, http("Apache httpd", &[80])),
    ("apache2-foreground", None, http("Apache httpd", &[80])),
    ("node_exporter", None, http("node exporter", &[9100])),
];

/// Programs kudo-sim knows it does not simulate, and why.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "kubectl",
        "it acts on the cluster's API as the pod's ServiceAccount; a simulated container reaches no API server",
    ),
    (
        "nodetool",
        "it manages a Cassandra node over JMX; kudo-sim only stands in for the Cassandra server",
    ),
    (
        "cqlsh",
        "it queries Cassandra; kudo-sim only stands in for the Cassandra server",
    ),
    ("curl", "HTTP clients are not simulated"),
    ("wget", "HTTP clients are not simulated"),
    ("java", "a JVM program; kudo-sim runs no interpreter"),
    ("python", "a Python program; kudo-sim runs no interpreter"),
    ("python3", "a Python program; kudo-sim runs no interpreter"),
    ("perl", "a Perl program; kudo-sim runs no interpreter"),
    ("apt-get", "a simulated container has no packages to install"),
    ("apk", "a simulated container has no packages to install"),
];

/// Programs of particular images kudo-sim knows it does not simulate, and why:
/// `(image repository, program, reason)`.
pub const REFUSED_IN_IMAGES: &[(&str, &str, &str)] = &[(
    "mesosphere/cassandra",
    "bootstrap",
    "the KUDO Cassandra image's program that prepares a node for the Cassandra server, which kudo-sim only stands in for",
)];

/// A long-running program kudo-sim stands in for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandIn {
    /// What it stands in for (`ZooKeeper`).
    pub server: &'static str,
    /// How it answers its clients.
    pub protocol: Protocol,
    /// The program (or `the entrypoint of IMAGE`) it started from.
    pub program: String,
    /// Ports it listens on: the container's `containerPort`s, else the server's usual ones.
    pub ports: Vec<u16>,
}

/// A running stand-in and what its clients stored in it.
#[derive(Debug, Clone)]
pub struct Server {
    /// The stand-in that runs.
    pub standin: StandIn,
    /// `namespace/pod`.
    pub pod: String,
    /// What its clients stored in it.
    pub data: Data,
}

/// What a stand-in's clients can change.
#[derive(Debug, Clone)]
pub enum Data {
    /// A stand-in whose clients store nothing.
    None,
    /// znode path → data.
    ZooKeeper(BTreeMap<String, Vec<u8>>),
    /// The keys and cluster state of a Redis stand-in.
    Redis(RedisData),
    /// Database names.
    MySql(BTreeSet<String>),
}

/// A Redis stand-in's keys and cluster membership.
#[derive(Debug, Clone, Default)]
pub struct RedisData {
    /// Key → value, as `SET` stored them.
    pub keys: BTreeMap<String, String>,
    /// `ip:port` of every node of the cluster it was made part of, masters first.
    pub cluster: Vec<String>,
    /// How many of the `cluster` nodes are masters (the first ones).
    pub masters: usize,
}

impl Server {
    /// A fresh stand-in for `standin` in container `c`.
    pub fn new(standin: StandIn, c: &Container) -> Server {
        let data = match standin.protocol {
            Protocol::ZooKeeper => Data::ZooKeeper(BTreeMap::from([("/zookeeper".to_string(), Vec::new())])),
            Protocol::Redis => Data::Redis(RedisData::default()),
            Protocol::MySql => {
                let mut dbs: BTreeSet<String> = ["information_schema", "mysql", "performance_schema", "sys"]
                    .into_iter()
                    .map(String::from)
                    .collect();
                for key in ["MYSQL_DATABASE", "MARIADB_DATABASE"] {
                    dbs.extend(c.env.get(key).filter(|v| !v.is_empty()).cloned());
                }
                Data::MySql(dbs)
            }
            _ => Data::None,
        };
        Server {
            standin,
            pod: format!("{}/{}", c.namespace, c.pod),
            data,
        }
    }
}

/// The repository of an image reference: registry, tag, digest and `library/` removed.
pub fn repository(image: &str) -> String {
    let no_digest = image.split('@').next().unwrap_or(image);
    let no_tag = match no_digest.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => no_digest,
    };
    let mut parts: Vec<&str> = no_tag.split('/').collect();
    if parts.len() > 1 && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost") {
        parts.remove(0);
    }
    if parts.first() == Some(&"library") {
        parts.remove(0);
    }
    parts.join("/")
}

/// The server kind of an image, if kudo-sim knows it.
pub fn image_kind(image: &str) -> Option<Kind> {
    let repo = repository(image);
    IMAGES.iter().find(|(r, _)| *r == repo).map(|(_, k)| *k)
}

/// The server kind a program starts, if it is one of [`PROGRAMS`] run to stay in the foreground.
pub fn program(name: &str, args: &[String]) -> Option<Kind> {
    PROGRAMS
        .iter()
        .find(|(p, fg, _)| *p == name && fg.is_none_or(|a| args.iter().any(|x| x == a)))
        .map(|(_, _, k)| *k)
}

/// The stand-in for `kind` started by `program` in container `c`.
pub fn serving(c: &Container, kind: Kind, program: &str) -> StandIn {
    let ports = if c.ports.is_empty() {
        kind.ports.to_vec()
    } else {
        c.ports.clone()
    };
    StandIn {
        server: kind.name,
        protocol: kind.protocol,
        program: program.to_string(),
        ports,
    }
}

/// In a long-running container of a known image, the image's server taken over from `program`.
pub fn for_image_program(c: &Container, program: &str) -> Option<StandIn> {
    if !c.long_running {
        return None;
    }
    image_kind(&c.image).map(|k| serving(c, k, program))
}

/// The image's entrypoint, run by a container without `command`: in a long-running container a
/// server (of the image's kind, or a plain one for an image kudo-sim does not know).
pub fn entrypoint(c: &Container) -> Option<StandIn> {
    if !c.long_running {
        return None;
    }
    let program = format!("the entrypoint of {}", c.image);
    let kind = image_kind(&c.image).unwrap_or(Kind {
        name: "the image's server",
        protocol: Protocol::Tcp,
        ports: &[],
    });
    Some(serving(c, kind, &program))
}

/// Images without an `ENTRYPOINT`, whose default command is a shell: a container's `args` are
/// its command line, and with none the shell reads an empty stdin and ends.
pub const SHELL_IMAGES: &[&str] = &["busybox", "alpine", "debian", "ubuntu", "bash"];

/// Whether `image` is one of [`SHELL_IMAGES`].
pub fn shell_image(image: &str) -> bool {
    SHELL_IMAGES.contains(&repository(image).as_str())
}

/// Why kudo-sim does not simulate `program` in a container of `image`, when it is one of
/// [`REFUSED`] or [`REFUSED_IN_IMAGES`].
pub fn refusal_in(image: &str, program: &str) -> Option<&'static str> {
    let repo = repository(image);
    REFUSED
        .iter()
        .find(|(p, _)| *p == program)
        .map(|(_, why)| *why)
        .or_else(|| {
            REFUSED_IN_IMAGES
                .iter()
                .find(|(i, p, _)| *i == repo && *p == program)
                .map(|(_, _, why)| *why)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories() {
        assert_eq!(repository("zookeeper:3.6.2"), "zookeeper");
        assert_eq!(repository("docker.io/library/redis:5.0.1-alpine"), "redis");
        assert_eq!(
            repository("quay.io/prometheus/node-exporter:v0.18.1"),
            "prometheus/node-exporter"
        );
        assert_eq!(repository("localhost:5000/app@sha256:00"), "app");
        assert_eq!(repository("mesosphere/kafka:2.5.1-1.3.1"), "mesosphere/kafka");
        assert!(image_kind("docker.elastic.co/elasticsearch/elasticsearch:7.0.0").is_some());
        assert_eq!(program("zkServer.sh", &["status".into()]), None);
        assert!(program("zkServer.sh", &["start-foreground".into()]).is_some());
    }
}
