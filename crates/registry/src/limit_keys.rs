//! The one declaration of every limit key ([`with_limit_keys!`](crate::with_limit_keys)): each row is deserialized, combined, documented, checked for loosening and applied per tool by whoever consumes the table.
//!
//! In the shape of uv's `Options`: a key is one row here, and every place that needs the keys
//! (the CLI's config file, layers, environment, reports, the loosening check of a project's
//! config and the generated reference in `docs/operators.md`; this crate's [`ToolOverride`])
//! is expanded from the rows, so none of them can miss a key. Adding a limit is one row plus,
//! for a key the executor enforces, its field of [`Limits`](toolsmith_executor::Limits).
//!
//! [`ToolOverride`]: crate::ToolOverride

use std::time::Duration;

/// The longest timeout a tool may ask for when the operator sets no `max_timeout`: the most a
/// Nanocoder manifest may declare.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// The value types of limit keys: each row of [`with_limit_keys!`](crate::with_limit_keys)
/// names one, which fixes the key's value once resolved (the executor's type) and how values
/// compare.
pub mod limit_kind {
    /// A duration that cannot be lifted (`timeout`, `grace`, `max_timeout`).
    #[derive(Debug)]
    pub enum Duration {}
    /// A duration or `unlimited` (`cpu`).
    #[derive(Debug)]
    pub enum DurationCap {}
    /// A size in bytes that cannot be lifted (`max_output`).
    #[derive(Debug)]
    pub enum Size {}
    /// A size in bytes or `unlimited` (`memory`, `max_file_size`, `tmp_size`).
    #[derive(Debug)]
    pub enum SizeCap {}
    /// A count or `unlimited` (`max_processes`, `max_open_files`).
    #[derive(Debug)]
    pub enum CountCap {}
}

/// What a kind of limit resolves to, and how two resolved values compare.
pub trait LimitKind {
    /// The resolved value: the executor's type (`None` is unlimited).
    type Value: Copy + std::fmt::Debug + PartialEq;
    /// Whether the value may be `unlimited` (`None`).
    const UNLIMITED: bool;
    /// Whether `value` grants more than `other` (unlimited grants the most).
    fn larger(value: Self::Value, other: Self::Value) -> bool;
}

/// `None`, unlimited, is larger than any value.
fn larger_cap<T: PartialOrd>(value: Option<T>, other: Option<T>) -> bool {
    match (value, other) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(value), Some(other)) => value > other,
    }
}

impl LimitKind for limit_kind::Duration {
    const UNLIMITED: bool = false;
    type Value = Duration;
    fn larger(value: Duration, other: Duration) -> bool {
        value > other
    }
}

impl LimitKind for limit_kind::DurationCap {
    const UNLIMITED: bool = true;
    type Value = Option<Duration>;
    fn larger(value: Option<Duration>, other: Option<Duration>) -> bool {
        larger_cap(value, other)
    }
}

impl LimitKind for limit_kind::Size {
    const UNLIMITED: bool = false;
    type Value = u64;
    fn larger(value: u64, other: u64) -> bool {
        value > other
    }
}

impl LimitKind for limit_kind::SizeCap {
    const UNLIMITED: bool = true;
    type Value = Option<u64>;
    fn larger(value: Option<u64>, other: Option<u64>) -> bool {
        larger_cap(value, other)
    }
}

impl LimitKind for limit_kind::CountCap {
    const UNLIMITED: bool = true;
    type Value = Option<u64>;
    fn larger(value: Option<u64>, other: Option<u64>) -> bool {
        larger_cap(value, other)
    }
}

/// Which way a limit's value gives tools more: a project config may move it the other way
/// only (the loosening check of the CLI's `tighten`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loosens {
    /// A larger value (or `unlimited`) gives more.
    Larger,
    /// A smaller value gives more (say, a minimum delay between calls).
    Smaller,
}

impl Loosens {
    /// Whether `wanted` gives tools more than `allowed`.
    pub fn loosens<K: LimitKind>(self, wanted: K::Value, allowed: K::Value) -> bool {
        match self {
            Loosens::Larger => K::larger(wanted, allowed),
            Loosens::Smaller => K::larger(allowed, wanted),
        }
    }

    /// The direction as the generated reference says it, for a key that may be `unlimited`
    /// or not ([`LimitKind::UNLIMITED`]).
    pub fn describe(self, unlimited: bool) -> &'static str {
        match self {
            Loosens::Larger if unlimited => "larger or `unlimited`",
            Loosens::Larger => "larger",
            Loosens::Smaller => "smaller",
        }
    }
}

/// `with_limit_keys! { callback { args } extra rows }` expands `callback! { { args } rows }`
/// with one row per limit key, then the extra rows (a test's fixture key): the one declaration
/// every consumer expands.
///
/// A row, in order:
/// - its doc comment: the reference of the key in `[limits]` (the config file's docs are
///   generated from it; its first sentence is the key's line in `docs/operators.md`);
/// - `key: Kind`: the key (as in `[limits]`, `[tools.NAME]`, [`ToolOverride`] and, for an
///   executor limit, [`Limits`]) and its [`limit_kind`];
/// - `loosens:` a [`Loosens`] variant: which way a project config may not move it;
/// - `in:` `Limits` for a field of the executor's [`Limits`] (default
///   `Limits::recommended()`), or `RunConfig(default)` for a [`RunConfig`] setting of its own
///   (`default` is resolved where the rows are expanded: [`DEFAULT_MAX_TIMEOUT`] must be in
///   scope there);
/// - `tool:` the doc of the key in a `[tools.NAME]` section, or `none` where a section cannot
///   set it;
/// - `env:` the CLI's `TOOLSMITH_*` variable (a name of its `EnvVars`), or `none`;
/// - `doctor:` the key's rank among the limits `toolsmith doctor` lists.
///
/// [`ToolOverride`]: crate::ToolOverride
/// [`RunConfig`]: crate::RunConfig
/// [`Limits`]: toolsmith_executor::Limits
/// [`limit_kind`]: crate::limit_kind
/// [`Loosens`]: crate::Loosens
#[macro_export]
macro_rules! with_limit_keys {
    ($callback:ident { $($args:tt)* } $($extra:tt)*) => {
        $callback! {
            { $($args)* }

            /// The wall-clock timeout of a call; then the whole tree gets SIGTERM,
            /// and SIGKILL after `grace`. A tool's own request (Kodelet `config`, a
            /// manifest's `timeout_ms`) replaces it, up to `max_timeout`. Default:
            /// `30s`. Environment: `TOOLSMITH_TIMEOUT`.
            timeout: Duration, loosens: Larger, in: Limits,
                tool: "The wall-clock timeout of this tool's calls.",
                env: TOOLSMITH_TIMEOUT, doctor: 0;
            /// The time between SIGTERM and SIGKILL. Default: `2s`.
            grace: Duration, loosens: Larger, in: Limits,
                tool: "The time between SIGTERM and SIGKILL for this tool.",
                env: none, doctor: 1;
            /// The CPU time limit. Default: `unlimited` (the timeout still bounds a
            /// call). Environment: `TOOLSMITH_CPU`.
            cpu: DurationCap, loosens: Larger, in: Limits,
                tool: "The CPU time limit, or `\"unlimited\"`.",
                env: TOOLSMITH_CPU, doctor: 2;
            /// The memory limit of a call. Default: `1GiB`. Environment:
            /// `TOOLSMITH_MEMORY`.
            memory: SizeCap, loosens: Larger, in: Limits,
                tool: "The memory limit, or `\"unlimited\"`.",
                env: TOOLSMITH_MEMORY, doctor: 3;
            /// The most processes in a call's tree. Default: `256`.
            max_processes: CountCap, loosens: Larger, in: Limits,
                tool: "The most processes in the call's tree, or `\"unlimited\"`.",
                env: none, doctor: 6;
            /// The largest file a tool may write. Default: `1GiB`.
            max_file_size: SizeCap, loosens: Larger, in: Limits,
                tool: "The largest file the tool may write, or `\"unlimited\"`.",
                env: none, doctor: 7;
            /// The most open file descriptors per process. Default: `1024`.
            max_open_files: CountCap, loosens: Larger, in: Limits,
                tool: "The most open file descriptors per process, or `\"unlimited\"`.",
                env: none, doctor: 8;
            /// Bytes kept per output stream; the rest is counted and discarded.
            /// Default: `1MiB`. Environment: `TOOLSMITH_MAX_OUTPUT`.
            max_output: Size, loosens: Larger, in: Limits,
                tool: "Bytes kept per output stream.",
                env: TOOLSMITH_MAX_OUTPUT, doctor: 4;
            /// The longest timeout a tool may ask for itself. Default: `5m`.
            max_timeout: Duration, loosens: Larger, in: RunConfig(DEFAULT_MAX_TIMEOUT),
                tool: none,
                env: none, doctor: 5;
            /// The size of the private TMPDIR of a `filesystem = "project"` or
            /// `"read-only"` call: a tmpfs in the call's mount namespace (also its
            /// `/dev/shm`), whose pages count against `memory`. A tool that fills it
            /// gets ENOSPC. `"unlimited"` leaves the kernel's default, half of RAM.
            /// Default: `64MiB`.
            tmp_size: SizeCap, loosens: Larger, in: Limits,
                tool: none,
                env: none, doctor: 9;

            $($extra)*
        }
    };
}
