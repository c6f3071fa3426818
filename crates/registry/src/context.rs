//! What every discovery and call of one [`Toolsmith`](crate::Toolsmith) shares: the executor, the
//! run configuration and the policy, passed down as one value instead of three arguments.

use std::sync::Arc;

use toolsmith_executor::Executor;

use crate::overrides::RunConfig;
use crate::policy::Policy;

/// The executor, the run configuration and the policy of one embedding.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// The executor every tool process runs through.
    pub(crate) executor: Arc<Executor>,
    /// How tool processes are run.
    pub(crate) config: RunConfig,
    /// Which tools may be listed, probed and called.
    pub(crate) policy: Policy,
}

impl Context {
    /// The same executor and policy with `config` in place of this one's.
    pub(crate) fn with_config(&self, config: RunConfig) -> Context {
        Context {
            executor: Arc::clone(&self.executor),
            config,
            policy: self.policy.clone(),
        }
    }
}
