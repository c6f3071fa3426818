//! The Prometheus metrics of `serve --http` (`/metrics`, text format): calls by tool and
//! outcome, their latency, the calls in flight, calls refused by a per-client limit, sandbox
//! refusals, discovery time, the backend.
//!
//! Label values are tool names the registry knows and outcomes toolsmith defines (`ok`, an
//! error code, `cancelled`): a client cannot add series by naming tools that do not exist.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabel {
    verdict: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: String,
}

/// The server's metrics; cheap to update from any call.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabel, Histogram>,
    in_flight: Gauge,
    refused: Family<ReasonLabel, Counter>,
    sandbox_refusals: Family<ToolLabel, Counter>,
    discovery_seconds: Gauge<f64, AtomicU64>,
    backend: Family<BackendLabel, Gauge>,
    egress: Family<VerdictLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("toolsmith");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls answered, by tool and outcome (ok, an error code, cancelled)",
            calls.clone(),
        );
        let latency = Family::<ToolLabel, Histogram>::new_with_constructor(|| {
            // 5 ms to about 41 s.
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        registry.register(
            "call_duration_seconds",
            "How long tool calls took, from the request to the result",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        let refused = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "calls_refused",
            "Calls not started because their client was over a per-client limit (reason: concurrency or rate)",
            refused.clone(),
        );
        let sandbox_refusals = Family::<ToolLabel, Counter>::default();
        registry.register(
            "sandbox_refusals",
            "Calls refused by policy or because the sandbox could not be enforced (POLICY_DENIED)",
            sandbox_refusals.clone(),
        );
        let discovery_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "discovery_duration_seconds",
            "How long the first discovery of the tool directories took",
            discovery_seconds.clone(),
        );
        let backend = Family::<BackendLabel, Gauge>::default();
        registry.register(
            "backend",
            "The containment backend in use (1 for the one in use)",
            backend.clone(),
        );
        let egress = Family::<VerdictLabel, Counter>::default();
        registry.register(
            "egress_connections",
            "Connections tools asked toolsmith's egress proxy for, by verdict (allowed, denied, failed)",
            egress.clone(),
        );
        Metrics {
            egress,
            registry,
            calls,
            latency,
            in_flight,
            refused,
            sandbox_refusals,
            discovery_seconds,
            backend,
        }
    }
}

impl Metrics {
    /// A call of `tool` started; the guard counts it in flight until it drops.
    pub(crate) fn call_started(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(self)
    }

    /// A call of `tool` ended with `outcome` after `seconds`.
    pub(crate) fn call_ended(&self, tool: &str, outcome: &str, seconds: f64) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.latency
            .get_or_create(&ToolLabel {
                tool: tool.to_owned(),
            })
            .observe(seconds);
        if outcome == "POLICY_DENIED" {
            self.sandbox_refusals
                .get_or_create(&ToolLabel {
                    tool: tool.to_owned(),
                })
                .inc();
        }
    }

    /// A call's connections through the egress proxy, one verdict each.
    pub(crate) fn egress<'a>(&self, verdicts: impl IntoIterator<Item = &'a str>) {
        for verdict in verdicts {
            self.egress
                .get_or_create(&VerdictLabel {
                    verdict: verdict.to_owned(),
                })
                .inc();
        }
    }

    /// A call was not started: its client was over the limit named by `reason`.
    pub(crate) fn call_refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// The first discovery took `seconds`; `backend` is the containment in use.
    pub(crate) fn started(&self, seconds: f64, backend: &str) {
        self.discovery_seconds.set(seconds);
        self.backend
            .get_or_create(&BackendLabel {
                backend: backend.to_owned(),
            })
            .set(1);
    }

    /// The metrics in the Prometheus text format.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ignored = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// A call counted in flight.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    #[test]
    fn calls_are_counted_by_tool_and_outcome() {
        let metrics = Metrics::default();
        metrics.started(0.25, "cgroup");
        {
            let _running = metrics.call_started();
            assert!(metrics.encode().contains("toolsmith_calls_in_flight 1"));
        }
        metrics.call_ended("hello", "ok", 0.01);
        metrics.call_ended("hello", "ok", 0.02);
        metrics.call_ended("wipe", "POLICY_DENIED", 0.0);
        metrics.egress(["allowed", "denied", "denied"]);
        metrics.call_refused("rate");
        let text = metrics.encode();
        assert!(text.contains("toolsmith_calls_in_flight 0"), "{text}");
        assert!(
            text.contains(r#"toolsmith_calls_total{tool="hello",outcome="ok"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolsmith_sandbox_refusals_total{tool="wipe"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolsmith_egress_connections_total{verdict="denied"} 2"#)
                && text.contains(r#"toolsmith_egress_connections_total{verdict="allowed"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolsmith_call_duration_seconds_count{tool="hello"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolsmith_backend{backend="cgroup"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("toolsmith_discovery_duration_seconds 0.25"),
            "{text}"
        );
        assert!(
            text.contains(r#"toolsmith_calls_refused_total{reason="rate"} 1"#),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
