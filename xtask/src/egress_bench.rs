//! `cargo xtask bench`, the egress section: a 1 MiB HTTP transfer through a call's egress
//! proxy against the same transfer without it, in one run (issue 23, target ratio <= 1.2).
//!
//! The server is this process's own, on the host's loopback (no other address is ever
//! used). Each call runs `curl` in a sandbox: "direct" with the executor's network,
//! "proxied" with `Network::Proxy` granting exactly `127.0.0.1:PORT` (a literal grant, the
//! one way the proxy reaches loopback), `curl` told to use the proxy. All variants pay the
//! same client work: one fresh connection per transfer (no keep-alive on either side), the
//! same request, the same server and the same body. What is compared is curl's own timing of
//! the transfer, not the call (the sandbox's cost is the spawn bench's business): the time
//! to the first byte of the response, which holds the proxy's fixed cost per connection
//! (accept, parse, check, connect upstream), and the whole transfer. The variants
//! alternate in rounds whose order turns and flips each time, so the kernel's deferred work
//! left by one call (a network namespace torn down) falls on all alike.
//!
//! A third variant is a bare relay: the same call as "direct", curl told to use a relay of
//! this process (`bare_relay.rs`: one blocking thread, no checks, no runtime) as its proxy.
//! What it adds to "direct" is what relaying through a second TCP connection costs on this
//! machine with the host's TCP defaults; the proxy can do better than it only through what
//! its run's own network namespace has and the host's has not (`egress/window.rs`: the run's
//! sockets start with a wide receive window), and its first byte shows the proxy's own
//! fixed cost (runtime, checks, records) over the least a relay does.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use toolsmith_executor::{
    BackendChoice, Command, Egress, Executor, ExecutorConfig, Limits, Network, PROXY_PORT, Sandbox,
};

use crate::CheckFailed;
use crate::measure::{Stats, render_table};

/// The body of every response.
const BODY_BYTES: usize = 1 << 20;

/// The ratio issue 23 asks for.
const TARGET: f64 = 1.2;

/// One variant's samples: curl's time to the first byte and its whole transfer, in µs.
#[derive(Default)]
struct Timings {
    first_byte: Vec<f64>,
    total: Vec<f64>,
}

impl Timings {
    fn push(&mut self, (first_byte, total): (f64, f64)) {
        self.first_byte.push(first_byte);
        self.total.push(total);
    }
}

/// The distributions of the three variants.
pub(crate) struct EgressReport {
    direct_first_byte: Stats,
    direct: Stats,
    bare_first_byte: Stats,
    bare: Stats,
    proxied_first_byte: Stats,
    proxied: Stats,
    transfers: usize,
}

/// Serves `BODY_BYTES` to every request on a loopback port, until the process ends.
fn serve() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("could not bind a loopback port")?;
    let port = listener.local_addr().context("no local address")?.port();
    std::thread::spawn(move || {
        let body = vec![b'x'; BODY_BYTES];
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(clone);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {BODY_BYTES}\r\nConnection: close\r\n\r\n"
            );
            let _ignored = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(&body));
        }
    });
    Ok(port)
}

/// A curl call fetching from `port`, through the proxy on `proxy_port` or directly.
fn curl(port: u16, sandbox: Sandbox, proxy_port: Option<u16>) -> anyhow::Result<Command> {
    let mut command = Command::new(Path::new("/usr/bin/curl"), Path::new("/"))
        .context("could not plan a curl call")?;
    let proxy = proxy_port.map(|proxy_port| format!("http://127.0.0.1:{proxy_port}"));
    let via: &[&str] = match &proxy {
        Some(proxy) => &["--proxy", proxy, "--noproxy", ""],
        None => &["--noproxy", "*"],
    };
    for arg in via.iter().copied().chain([
        "-sf",
        "-o",
        "/dev/null",
        "-w",
        "%{time_starttransfer} %{time_total}",
    ]) {
        command.arg(std::ffi::OsStr::new(arg));
    }
    command.arg(std::ffi::OsStr::new(&format!("http://127.0.0.1:{port}/")));
    command.sandbox(sandbox);
    Ok(command)
}

/// Runs one call and returns curl's time to the first byte and its whole transfer, in µs.
fn transfer(
    runtime: &tokio::runtime::Runtime,
    executor: &Executor,
    command: &Command,
    limits: &Limits,
) -> anyhow::Result<(f64, f64)> {
    let outcome = runtime
        .block_on(executor.run(command, limits))
        .context("the curl call failed to run")?;
    let text = outcome.stdout.text_lossy();
    let mut seconds = text.split_whitespace().map(str::parse::<f64>);
    let timings = match (seconds.next(), seconds.next(), seconds.next()) {
        (Some(Ok(first_byte)), Some(Ok(total)), None) if outcome.success() => {
            Some((first_byte * 1e6, total * 1e6))
        }
        _ => None,
    };
    timings.ok_or_else(|| {
        CheckFailed(format!(
            "curl did not transfer ({:?}): {text} {}",
            outcome.termination,
            outcome.stderr.text_lossy()
        ))
        .into()
    })
}

/// Measures `transfers` transfers of each variant, in rounds of turning and flipping order,
/// after a few warm-ups.
pub(crate) fn measure(transfers: usize) -> anyhow::Result<EgressReport> {
    let port = serve()?;
    let bare_port = crate::bare_relay::start(port)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start a tokio runtime")?;
    let executor = {
        let _entered = runtime.enter();
        Executor::new(ExecutorConfig {
            backend: BackendChoice::Auto,
            max_concurrent: None,
        })
        .context("could not create the executor")?
    };
    let grant = format!("127.0.0.1:{port}");
    let egress = Egress::from_entries([grant.as_str()]).context("the bench's own grant")?;
    // Direct, through the bare relay, through the call's proxy.
    let commands = [
        curl(port, Sandbox::none(), None)?,
        curl(port, Sandbox::none(), Some(bare_port))?,
        curl(
            port,
            Sandbox {
                network: Network::Proxy(egress),
                ..Sandbox::none()
            },
            Some(PROXY_PORT),
        )?,
    ];
    let limits = Limits {
        timeout: Duration::from_secs(30),
        ..Limits::recommended()
    };
    for _ in 0..3 {
        for command in &commands {
            transfer(&runtime, &executor, command, &limits)?;
        }
    }
    let mut samples: [Timings; 3] = Default::default();
    for round in 0..transfers {
        let mut order = [0, 1, 2];
        order.rotate_left(round % 3);
        if round % 2 == 1 {
            order.reverse();
        }
        for variant in order {
            samples[variant].push(transfer(&runtime, &executor, &commands[variant], &limits)?);
        }
    }
    let [direct, bare, proxied] = samples;
    Ok(EgressReport {
        direct_first_byte: Stats::of(&direct.first_byte),
        direct: Stats::of(&direct.total),
        bare_first_byte: Stats::of(&bare.first_byte),
        bare: Stats::of(&bare.total),
        proxied_first_byte: Stats::of(&proxied.first_byte),
        proxied: Stats::of(&proxied.total),
        transfers,
    })
}

impl EgressReport {
    /// The proxied median over the direct one.
    pub(crate) fn ratio(&self) -> f64 {
        self.proxied.median / self.direct.median
    }

    /// The section of the report.
    pub(crate) fn render(&self) -> String {
        let mut report = String::new();
        let _ = writeln!(
            report,
            "egress proxy: a 1 MiB HTTP transfer, curl's timing (µs), {} transfers per variant, alternating, one fresh connection each",
            self.transfers
        );
        let header = ["variant", "first byte median", "median", "p90", "ratio"].map(str::to_owned);
        let rows = [
            (
                "direct (network allowed)",
                &self.direct_first_byte,
                &self.direct,
            ),
            (
                "bare relay (no checks, one blocking thread)",
                &self.bare_first_byte,
                &self.bare,
            ),
            (
                "through the call's egress proxy",
                &self.proxied_first_byte,
                &self.proxied,
            ),
        ]
        .map(|(label, first_byte, stats)| {
            [
                label.to_owned(),
                format!("{:.0}", first_byte.median),
                format!("{:.0}", stats.median),
                format!("{:.0}", stats.p90),
                format!("{:.2}", stats.median / self.direct.median),
            ]
        });
        report.push_str(&render_table(&header, &rows, 1));
        let _ = writeln!(
            report,
            "the proxy adds {:+.0} µs to the first byte (its fixed cost per connection) and {:+.0} µs to the whole transfer (medians); the bare relay adds {:+.0} µs and {:+.0} µs",
            self.proxied_first_byte.median - self.direct_first_byte.median,
            self.proxied.median - self.direct.median,
            self.bare_first_byte.median - self.direct_first_byte.median,
            self.bare.median - self.direct.median,
        );
        let _ = writeln!(
            report,
            "proxy / bare relay: {:.2}; bare relay / direct: {:.2} (relaying at all, with the host's TCP defaults)",
            self.proxied.median / self.bare.median,
            self.bare.median / self.direct.median,
        );
        let _ = writeln!(
            report,
            "proxied / direct (1 MiB): {:.2}, target <= {TARGET}: {}",
            self.ratio(),
            if self.ratio() <= TARGET {
                "met"
            } else {
                "NOT met"
            }
        );
        report
    }
}
