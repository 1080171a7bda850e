//! Parsers for the virtual network's options: durations, loss
//! percentages, partition plans and virtual hosts.

use detrun_scheduler::net::{Endpoint, NetConfig, Partition};
use std::net::IpAddr;

/// The network options of a run (also taken by `hunt` and `replay`, which
/// pass them on to every run).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NetOpts {
    /// The network AF_INET/AF_INET6 sockets use: `virtual` (the default: a
    /// simulated network inside the sandbox; loopback and --host addresses
    /// work, anything else is unreachable) or `host` (the real network,
    /// reported as a hazard). Example: --net=host
    #[arg(long, value_name = "MODE", default_value = "virtual", value_parser = ["virtual", "host"])]
    pub net: String,

    /// One-way delay of every virtual packet, in virtual time (costs no wall
    /// time). Example: --net-latency 200ms
    #[arg(long, value_name = "DURATION", value_parser = validate_duration)]
    pub net_latency: Option<String>,

    /// Up to this much more delay per packet, drawn from the seed.
    /// Example: --net-latency 50ms --net-jitter 20ms
    #[arg(long, value_name = "DURATION", value_parser = validate_duration)]
    pub net_jitter: Option<String>,

    /// Probability that a UDP datagram is lost (a TCP segment is delayed by
    /// a retransmission instead), drawn from the seed. Example: --net-loss 30%
    #[arg(long, value_name = "PERCENT", value_parser = validate_probability)]
    pub net_loss: Option<String>,

    /// Probability that a TCP segment resets its connection instead of
    /// arriving (both ends then see ECONNRESET), drawn from the seed.
    /// Example: --net-reset 2%
    #[arg(long, value_name = "PERCENT", value_parser = validate_probability)]
    pub net_reset: Option<String>,

    /// Cut traffic between A and B from FROM until UNTIL (virtual time since
    /// the start); repeatable. A, B: HOST, HOST:PORT, :PORT or *. UDP across
    /// a partition is dropped, TCP is held until it heals.
    /// Example: --net-partition ':9101/:9102@2s..7s'
    #[arg(long, value_name = "A/B@FROM..UNTIL")]
    pub net_partition: Vec<String>,

    /// A virtual host: NAME resolves to ADDR (through the guest's
    /// /etc/hosts) and ADDR is an address of the sandbox; repeatable.
    /// Example: --host db=10.0.0.2
    #[arg(long, value_name = "NAME=ADDR", value_parser = validate_host)]
    pub host: Vec<String>,
}

fn validate_duration(s: &str) -> Result<String, String> {
    duration_ns(s).map(|_| s.to_string())
}

fn validate_probability(s: &str) -> Result<String, String> {
    probability(s).map(|_| s.to_string())
}

fn validate_host(s: &str) -> Result<String, String> {
    host(s).map(|_| s.to_string())
}

impl NetOpts {
    /// The world's network configuration, and whether it is `--net=host`.
    pub fn config(&self) -> Result<(NetConfig, bool), String> {
        let hosts = self
            .host
            .iter()
            .map(|h| host(h))
            .collect::<Result<Vec<_>, _>>()?;
        let partitions = self
            .net_partition
            .iter()
            .map(|p| partition(p, &hosts).map_err(|e| format!("--net-partition {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let opt = |v: &Option<String>| v.as_deref().map(duration_ns).transpose();
        let cfg = NetConfig {
            latency_ns: opt(&self.net_latency)?.unwrap_or(0),
            jitter_ns: opt(&self.net_jitter)?.unwrap_or(0),
            loss: self
                .net_loss
                .as_deref()
                .map(probability)
                .transpose()?
                .unwrap_or(0.0),
            reset: self
                .net_reset
                .as_deref()
                .map(probability)
                .transpose()?
                .unwrap_or(0.0),
            partitions,
            hosts,
        };
        let net_host = self.net == "host";
        if net_host && (cfg.has_faults() || !cfg.hosts.is_empty()) {
            return Err("--net-latency, --net-jitter, --net-loss, --net-reset, --net-partition and --host need the virtual network (not --net=host)".into());
        }
        Ok((cfg, net_host))
    }

    /// The same options as run flags.
    pub fn flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.net == "host" {
            v.push("--net=host".to_string());
        }
        for (name, val) in [
            ("--net-latency", &self.net_latency),
            ("--net-jitter", &self.net_jitter),
            ("--net-loss", &self.net_loss),
            ("--net-reset", &self.net_reset),
        ] {
            if let Some(x) = val {
                v.push(format!("{name}={x}"));
            }
        }
        for p in &self.net_partition {
            v.push(format!("--net-partition={p}"));
        }
        for h in &self.host {
            v.push(format!("--host={h}"));
        }
        v
    }
}

/// `200ms`, `1s`, `1.5s`, `250us`, `2m`, `100ns` (a bare number is ms).
pub fn duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 200ms, 1s, 1.5s, 250us)"))?;
    let mult = match unit.trim() {
        "" | "ms" => 1e6,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "s" => 1e9,
        "m" | "min" => 60e9,
        u => {
            return Err(format!(
                "unknown unit `{u}` in `{s}` (use ns, us, ms, s or m)"
            ))
        }
    };
    let ns = v * mult;
    if !ns.is_finite() || !(0.0..=1e18).contains(&ns) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(ns as u64)
}

/// `30%` or `0.3`.
pub fn probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a probability (examples: 30%, 0.3)"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("`{s}` is not between 0% and 100%"));
    }
    Ok(v)
}

fn endpoint(s: &str, hosts: &[(String, IpAddr)]) -> Result<Endpoint, String> {
    let t = s.trim();
    if t == "*" || t.is_empty() {
        return Ok(Endpoint {
            ip: None,
            port: None,
        });
    }
    // [v6]:port, v4:port, :port, host:port, or an address/host alone.
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("missing `]` in `{s}`"))?;
        (h, after.strip_prefix(':'))
    } else if t.matches(':').count() == 1 {
        let (h, p) = t.split_once(':').unwrap_or((t, ""));
        (h, Some(p))
    } else {
        (t, None)
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().map_err(|_| format!("bad port in `{s}`"))?),
        None => None,
    };
    let ip = match host {
        "" | "*" => None,
        h => Some(match h.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => hosts
                .iter()
                .find(|(n, _)| n == h)
                .map(|x| x.1)
                .or((h == "localhost").then(|| IpAddr::from([127, 0, 0, 1])))
                .ok_or_else(|| {
                    format!("unknown host `{h}` in `{s}` (declare it with --host {h}=ADDR)")
                })?,
        }),
    };
    Ok(Endpoint { ip, port })
}

/// `A/B@FROM..UNTIL`: traffic between A and B is cut from FROM until UNTIL
/// (virtual time since the start). A and B: `HOST`, `HOST:PORT`, `:PORT`, `*`.
pub fn partition(s: &str, hosts: &[(String, IpAddr)]) -> Result<Partition, String> {
    let usage = "expected A/B@FROM..UNTIL, e.g. ':9101/:9102@2s..7s' or 'db/*@1s..5s'";
    let (pair, when) = s.split_once('@').ok_or_else(|| format!("`{s}`: {usage}"))?;
    let (a, b) = pair
        .split_once('/')
        .ok_or_else(|| format!("`{s}`: {usage}"))?;
    let (from, until) = when
        .split_once("..")
        .ok_or_else(|| format!("`{s}`: {usage}"))?;
    let from = duration_ns(from)?;
    let until = duration_ns(until)?;
    if until <= from {
        return Err(format!("`{s}`: the partition must heal after it starts"));
    }
    Ok(Partition {
        a: endpoint(a, hosts)?,
        b: endpoint(b, hosts)?,
        from,
        until,
    })
}

/// `NAME=ADDR`.
pub fn host(s: &str) -> Result<(String, IpAddr), String> {
    let (n, a) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=ADDR, e.g. db=10.0.0.2"))?;
    let ip: IpAddr = a
        .trim()
        .parse()
        .map_err(|_| format!("`{a}` is not an IP address"))?;
    let n = n.trim();
    if n.is_empty() || n.contains(char::is_whitespace) {
        return Err(format!("`{n}` is not a host name"));
    }
    Ok((n.to_string(), ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_options() {
        assert_eq!(duration_ns("200ms"), Ok(200_000_000));
        assert_eq!(duration_ns("1.5s"), Ok(1_500_000_000));
        assert!(duration_ns("fast").is_err());
        assert_eq!(probability("30%"), Ok(0.3));
        assert!(probability("130%").is_err());
        let hosts = vec![host("db=10.0.0.2").unwrap()];
        let p = partition(":9101/db:5432@2s..7s", &hosts).unwrap();
        assert_eq!(
            p.a,
            Endpoint {
                ip: None,
                port: Some(9101)
            }
        );
        assert_eq!(p.b.ip, Some("10.0.0.2".parse().unwrap()));
        assert_eq!((p.from, p.until), (2_000_000_000, 7_000_000_000));
        assert!(partition("a/b@5s..1s", &hosts).is_err());
        assert!(partition("nohost/*@1s..2s", &hosts).is_err());
        let p = partition("[::1]:80/*@0s..1s", &hosts).unwrap();
        assert_eq!(p.a.port, Some(80));
    }
}
