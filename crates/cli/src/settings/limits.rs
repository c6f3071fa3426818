//! The resource limits: the `limit_keys!` table, one row per key (its parser, writer, variable, `doctor` rank and scope), driving the options of a layer, the file, the environment, the resolved limits and their reports.
//!
//! A row is not the key's only declaration: its field is also declared in `schema.rs` (`RawLimits`,
//! `RawTool`, for the file's format and docs), in `tighten.rs` (the loosening check of a
//! project's config), in `resolve.rs` (a `[tools.NAME]` section as the registry's override), in
//! the registry's `ToolOverride` and `RunConfig::call_config`, and in the executor's `Limits`,
//! so a new limit touches each of them.

use std::time::Duration;

use toolsmith_executor::Limits;

use toolsmith_registry::format_duration;

use crate::env_vars::EnvVars;
use crate::settings::combine::Combine;
use crate::settings::schema::{RawLimits, RawTool, Scalar};
use crate::settings::values::{
    ValueError, count_cap, duration, duration_cap, show_count_cap, show_duration_cap,
    show_size_cap, size, size_cap,
};
use crate::units::{Cap, format_size};

/// The longest timeout a tool may ask for when the operator sets no
/// `max_timeout`: the most a Nanocoder manifest may declare.
pub(crate) const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// One limit key and everything that differs between limit keys.
pub(crate) struct LimitKey {
    /// The key, as in `[limits]`, `[tools.NAME]` and the executor's `Limits`.
    pub(crate) name: &'static str,
    /// The key in `[limits]`, as `doctor` names it.
    pub(crate) config_key: &'static str,
    /// The `TOOLSMITH_*` variable that sets it, if any.
    pub(crate) env: Option<&'static str>,
    /// Where `doctor` lists it among the limits.
    pub(crate) doctor_rank: u8,
    /// Whether the layer sets it.
    pub(crate) is_set: fn(&LimitsOptions) -> bool,
    /// Parses `text` into the layer.
    pub(crate) parse: fn(&mut LimitsOptions, &str) -> Result<(), ValueError>,
    /// The value the layer sets, as written in a file.
    pub(crate) describe: fn(&LimitsOptions) -> Option<String>,
    /// The resolved value, as written in a file; `None` for a key that is no executor limit.
    pub(crate) resolved: Option<fn(&Limits) -> String>,
    /// Its scalar in `[limits]`.
    pub(crate) in_limits: fn(&RawLimits) -> &Option<Scalar>,
    /// Its scalar in `[tools.NAME]`; `None` for a key a tool's section cannot set.
    pub(crate) in_tool: Option<fn(&RawTool) -> &Option<Scalar>>,
}

/// How a limit's value in a layer becomes the executor's value, and back for reports.
trait LimitValue: Copy {
    type Resolved: Copy;
    fn resolve(option: Option<Self>, default: Self::Resolved) -> Self::Resolved;
    fn unresolve(resolved: Self::Resolved) -> Self;
}

impl LimitValue for Duration {
    type Resolved = Duration;
    fn resolve(option: Option<Duration>, default: Duration) -> Duration {
        option.unwrap_or(default)
    }
    fn unresolve(resolved: Duration) -> Duration {
        resolved
    }
}

impl LimitValue for u64 {
    type Resolved = u64;
    fn resolve(option: Option<u64>, default: u64) -> u64 {
        option.unwrap_or(default)
    }
    fn unresolve(resolved: u64) -> u64 {
        resolved
    }
}

impl<T: Copy> LimitValue for Cap<T> {
    type Resolved = Option<T>;
    fn resolve(option: Option<Cap<T>>, default: Option<T>) -> Option<T> {
        match option {
            Some(cap) => cap.into_option(),
            None => default,
        }
    }
    fn unresolve(resolved: Option<T>) -> Cap<T> {
        resolved.map_or(Cap::Unlimited, Cap::At)
    }
}

/// Defines [`LimitsOptions`], its [`Combine`], its resolution and [`LIMIT_KEYS`] from one
/// row per key: the key, its type in a layer, its parser and writer, its variable, its rank
/// in `doctor`, whether a `[tools.NAME]` section sets it, and whether it is an executor limit
/// (of the same name in `Limits`).
macro_rules! limit_keys {
    ($(
        $(#[doc = $doc:literal])*
        $key:ident: $value:ty, $parse:path, $show:path, env: $env:expr, doctor: $rank:literal,
        tool: $tool:tt, executor: $executor:tt;
    )*) => {
        /// Resource limits as one layer sets them; `None` leaves a limit to lower layers.
        #[derive(Debug, Default, Clone, PartialEq)]
        pub(crate) struct LimitsOptions {
            $($(#[doc = $doc])* pub(crate) $key: Option<$value>,)*
        }

        impl Combine for LimitsOptions {
            fn combine(self, lower: LimitsOptions) -> LimitsOptions {
                LimitsOptions {
                    $($key: self.$key.combine(lower.$key),)*
                }
            }
        }

        impl LimitsOptions {
            /// The limits, with `Limits::recommended()` for whatever no layer set.
            pub(crate) fn resolve(self) -> Limits {
                let options = self;
                let mut limits = Limits::recommended();
                $(limit_keys!(@resolve $executor, limits, options, $key, $value);)*
                limits
            }
        }

        /// Every limit key, in the order of [`LimitsOptions`] and of the JSON reports.
        pub(crate) const LIMIT_KEYS: &[LimitKey] = &[$(
            LimitKey {
                name: stringify!($key),
                config_key: concat!("limits.", stringify!($key)),
                env: $env,
                doctor_rank: $rank,
                is_set: |options| options.$key.is_some(),
                parse: |options, text| {
                    options.$key = Some($parse(text)?);
                    Ok(())
                },
                describe: |options| options.$key.map($show),
                resolved: limit_keys!(@resolved $executor, $key, $value, $show),
                in_limits: |raw| &raw.$key,
                in_tool: limit_keys!(@tool $tool, $key),
            },
        )*];
    };
    (@resolve true, $limits:ident, $options:ident, $key:ident, $value:ty) => {
        $limits.$key = <$value as LimitValue>::resolve($options.$key, $limits.$key)
    };
    (@resolve false, $limits:ident, $options:ident, $key:ident, $value:ty) => {};
    (@resolved true, $key:ident, $value:ty, $show:path) => {
        Some(|limits: &Limits| $show(<$value as LimitValue>::unresolve(limits.$key)))
    };
    (@resolved false, $key:ident, $value:ty, $show:path) => {
        None
    };
    (@tool true, $key:ident) => {
        Some(|raw: &RawTool| &raw.$key)
    };
    (@tool false, $key:ident) => {
        None
    };
}

limit_keys! {
    timeout: Duration, duration, format_duration,
        env: Some(EnvVars::TOOLSMITH_TIMEOUT), doctor: 0, tool: true, executor: true;
    grace: Duration, duration, format_duration,
        env: None, doctor: 1, tool: true, executor: true;
    cpu: Cap<Duration>, duration_cap, show_duration_cap,
        env: Some(EnvVars::TOOLSMITH_CPU), doctor: 2, tool: true, executor: true;
    memory: Cap<u64>, size_cap, show_size_cap,
        env: Some(EnvVars::TOOLSMITH_MEMORY), doctor: 3, tool: true, executor: true;
    max_processes: Cap<u64>, count_cap, show_count_cap,
        env: None, doctor: 6, tool: true, executor: true;
    max_file_size: Cap<u64>, size_cap, show_size_cap,
        env: None, doctor: 7, tool: true, executor: true;
    max_open_files: Cap<u64>, count_cap, show_count_cap,
        env: None, doctor: 8, tool: true, executor: true;
    max_output: u64, size, format_size,
        env: Some(EnvVars::TOOLSMITH_MAX_OUTPUT), doctor: 4, tool: true, executor: true;
    /// The size of the private TMPDIR (a tmpfs) of a filesystem-restricted call.
    tmp_size: Cap<u64>, size_cap, show_size_cap,
        env: None, doctor: 9, tool: false, executor: true;
    /// The ceiling of a timeout a tool asks for itself; not an executor limit.
    max_timeout: Duration, duration, format_duration,
        env: None, doctor: 5, tool: false, executor: false;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::settings::config_schema;
    use crate::settings::limits::LIMIT_KEYS;

    /// The keys of the struct `name` in the config file's schema.
    fn schema_keys(name: &str) -> BTreeSet<String> {
        config_schema()["$defs"][name]["properties"]
            .as_object()
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// A key of `[limits]` missing from the table would be parsed and then silently ignored.
    #[test]
    fn the_table_has_every_key_of_limits() {
        let table: BTreeSet<String> = LIMIT_KEYS.iter().map(|key| key.name.to_owned()).collect();
        assert_eq!(table, schema_keys("RawLimits"));
    }

    #[test]
    fn the_table_has_every_limit_of_a_tool_section() {
        let others = [
            "env",
            "network",
            "filesystem",
            "syscalls",
            "read_hide",
            "read_reveal",
            "disabled",
            "secrets",
        ];
        let tool_limits: BTreeSet<String> = schema_keys("RawTool")
            .into_iter()
            .filter(|key| !others.contains(&key.as_str()))
            .collect();
        let table: BTreeSet<String> = LIMIT_KEYS
            .iter()
            .filter(|key| key.in_tool.is_some())
            .map(|key| key.name.to_owned())
            .collect();
        assert_eq!(table, tool_limits);
    }

    #[test]
    fn doctor_ranks_are_an_order() {
        let ranks: BTreeSet<u8> = LIMIT_KEYS.iter().map(|key| key.doctor_rank).collect();
        let expected: BTreeSet<u8> = (0..).take(LIMIT_KEYS.len()).collect();
        assert_eq!(ranks, expected);
    }
}
