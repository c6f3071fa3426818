//! The resource limits, expanded from their one declaration (`toolsmith_registry::with_limit_keys!`): the options of a layer, the file's `[limits]` and `[tools.NAME]` keys, the environment, the resolved limits, their reports, the loosening check and the generated reference.
//!
//! A limit key is one row of the registry's table (its value kind, loosening direction, where
//! it is stored, its `[tools.NAME]` doc, variable and `doctor` rank) and, for a key the
//! executor enforces, a field of the executor's `Limits`: [`limit_keys!`] turns the rows into
//! [`LimitsOptions`] and [`LIMIT_KEYS`], which everything else iterates, `schema.rs` turns them
//! into the file's `RawLimits` and `RawTool`, and the registry into its `ToolOverride`.

use std::time::Duration;

use toolsmith_executor::Limits;

use toolsmith_registry::{LimitKind, Loosens, ToolOverride, format_duration, limit_kind};

use crate::settings::combine::Combine;
use crate::settings::schema::{RawLimits, RawTool, Scalar};
use crate::settings::values::{
    ValueError, count_cap, duration, duration_cap, show_count_cap, show_duration_cap,
    show_size_cap, size, size_cap,
};
use crate::units::{Cap, format_size};

pub(crate) use toolsmith_registry::DEFAULT_MAX_TIMEOUT;

/// One limit key and everything that differs between limit keys, over the options `O` of a
/// layer, the file's `[limits]` section `R` and `[tools.NAME]` section `T`.
pub(crate) struct LimitKey<O: 'static = LimitsOptions, R: 'static = RawLimits, T: 'static = RawTool>
{
    /// The key, as in `[limits]`, `[tools.NAME]` and the executor's `Limits`.
    pub(crate) name: &'static str,
    /// The key in `[limits]`, as `doctor` names it.
    pub(crate) config_key: &'static str,
    /// Its doc comment: the reference of the key in `[limits]`.
    pub(crate) doc: &'static str,
    /// Which way a project config may not move it.
    pub(crate) loosens: Loosens,
    /// Whether it may be `unlimited`.
    pub(crate) unlimited: bool,
    /// The default, as written in a file.
    pub(crate) default: fn() -> String,
    /// The `TOOLSMITH_*` variable that sets it, if any.
    pub(crate) env: Option<&'static str>,
    /// Where `doctor` lists it among the limits.
    pub(crate) doctor_rank: u8,
    /// Whether the layer sets it.
    pub(crate) is_set: fn(&O) -> bool,
    /// Parses `text` into the layer.
    pub(crate) parse: fn(&mut O, &str) -> Result<(), ValueError>,
    /// The value the layer sets, as written in a file.
    pub(crate) describe: fn(&O) -> Option<String>,
    /// The resolved value, as written in a file; `None` for a key that is no executor limit.
    pub(crate) resolved: Option<fn(&Limits) -> String>,
    /// Removes the value of the first layer (a project's) when it gives tools more than the
    /// second (the user's, whose silence is the default), and says what it was and what applies.
    pub(crate) tighten: fn(&mut O, &O) -> Option<(String, String)>,
    /// Its scalar in `[limits]`.
    pub(super) in_limits: fn(&R) -> &Option<Scalar>,
    /// Its scalar in `[tools.NAME]`; `None` for a key a tool's section cannot set.
    pub(super) in_tool: Option<fn(&T) -> &Option<Scalar>>,
}

/// How a kind of limit is written in a layer: parsed, shown, and turned into the resolved value.
pub(crate) trait LayerValue: LimitKind {
    /// The value as a layer holds it (`Cap` keeps `unlimited` apart from silence).
    type Layer: Copy + std::fmt::Debug + PartialEq;
    fn parse(text: &str) -> Result<Self::Layer, ValueError>;
    fn show(value: Self::Layer) -> String;
    fn value(layer: Self::Layer) -> Self::Value;
    fn layer(value: Self::Value) -> Self::Layer;
    /// The value as written in a file, from the resolved value.
    fn show_value(value: Self::Value) -> String {
        Self::show(Self::layer(value))
    }
}

impl LayerValue for limit_kind::Duration {
    type Layer = Duration;
    fn parse(text: &str) -> Result<Duration, ValueError> {
        duration(text)
    }
    fn show(value: Duration) -> String {
        format_duration(value)
    }
    fn value(layer: Duration) -> Duration {
        layer
    }
    fn layer(value: Duration) -> Duration {
        value
    }
}

impl LayerValue for limit_kind::DurationCap {
    type Layer = Cap<Duration>;
    fn parse(text: &str) -> Result<Cap<Duration>, ValueError> {
        duration_cap(text)
    }
    fn show(value: Cap<Duration>) -> String {
        show_duration_cap(value)
    }
    fn value(layer: Cap<Duration>) -> Option<Duration> {
        layer.into_option()
    }
    fn layer(value: Option<Duration>) -> Cap<Duration> {
        value.map_or(Cap::Unlimited, Cap::At)
    }
}

impl LayerValue for limit_kind::Size {
    type Layer = u64;
    fn parse(text: &str) -> Result<u64, ValueError> {
        size(text)
    }
    fn show(value: u64) -> String {
        format_size(value)
    }
    fn value(layer: u64) -> u64 {
        layer
    }
    fn layer(value: u64) -> u64 {
        value
    }
}

impl LayerValue for limit_kind::SizeCap {
    type Layer = Cap<u64>;
    fn parse(text: &str) -> Result<Cap<u64>, ValueError> {
        size_cap(text)
    }
    fn show(value: Cap<u64>) -> String {
        show_size_cap(value)
    }
    fn value(layer: Cap<u64>) -> Option<u64> {
        layer.into_option()
    }
    fn layer(value: Option<u64>) -> Cap<u64> {
        value.map_or(Cap::Unlimited, Cap::At)
    }
}

impl LayerValue for limit_kind::CountCap {
    type Layer = Cap<u64>;
    fn parse(text: &str) -> Result<Cap<u64>, ValueError> {
        count_cap(text)
    }
    fn show(value: Cap<u64>) -> String {
        show_count_cap(value)
    }
    fn value(layer: Cap<u64>) -> Option<u64> {
        layer.into_option()
    }
    fn layer(value: Option<u64>) -> Cap<u64> {
        value.map_or(Cap::Unlimited, Cap::At)
    }
}

/// The project's value of one key when it gives tools more than the user's `allowed` (the
/// user's value, else `default`): what it was and what applies instead.
pub(crate) fn loosening<K: LayerValue>(
    loosens: Loosens,
    wanted: K::Layer,
    allowed: Option<K::Layer>,
    default: K::Value,
) -> Option<(String, String)> {
    let allowed = allowed.map_or(default, K::value);
    loosens
        .loosens::<K>(K::value(wanted), allowed)
        .then(|| (K::show(wanted), K::show_value(allowed)))
}

/// Expands the rows of `toolsmith_registry::with_limit_keys!` into [`LimitsOptions`], its
/// [`Combine`], its resolution and its part of a [`ToolOverride`], and [`LIMIT_KEYS`] over the
/// file's [`RawLimits`] and [`RawTool`] (which `schema.rs` expands from the same rows). A test
/// expands both again with a fixture row.
macro_rules! limit_keys {
    (@default Limits, $key:ident) => {
        Limits::recommended().$key
    };
    (@default RunConfig, $key:ident, $default:expr) => {
        $default
    };
    (@resolve Limits, $limits:ident, $options:ident, $key:ident, $kind:ident) => {
        if let Some(value) = $options.$key {
            $limits.$key = <limit_kind::$kind as LayerValue>::value(value);
        }
    };
    (@resolve RunConfig, $limits:ident, $options:ident, $key:ident, $kind:ident) => {};
    (@override Limits, $override:ident, $options:ident, $key:ident, $kind:ident) => {
        $override.$key = $options.$key.map(<limit_kind::$kind as LayerValue>::value);
    };
    (@override RunConfig, $override:ident, $options:ident, $key:ident, $kind:ident) => {};
    (@resolved Limits, $key:ident, $kind:ident) => {
        Some(|limits: &Limits| <limit_kind::$kind as LayerValue>::show_value(limits.$key))
    };
    (@resolved RunConfig, $key:ident, $kind:ident) => {
        None
    };
    (@env none) => {
        None
    };
    (@env $name:ident) => {
        Some(crate::env_vars::EnvVars::$name)
    };
    (@in_tool none, $key:ident) => {
        None
    };
    (@in_tool $doc:literal, $key:ident) => {
        Some(|raw: &RawTool| &raw.$key)
    };
    ({} $(
        $(#[doc = $doc:literal])*
        $key:ident: $kind:ident, loosens: $loosens:ident, in: $in:ident $(($default:expr))?,
            tool: $tool:tt, env: $env:tt, doctor: $rank:literal;
    )*) => {
        /// Resource limits as one layer sets them; `None` leaves a limit to lower layers.
        #[derive(Debug, Default, Clone, PartialEq)]
        pub(crate) struct LimitsOptions {
            $($(#[doc = $doc])* pub(crate) $key: Option<<limit_kind::$kind as LayerValue>::Layer>,)*
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
                $(limit_keys!(@resolve $in, limits, options, $key, $kind);)*
                limits
            }

            /// Sets the limits of `tool_override` that this layer sets.
            pub(crate) fn set_override(&self, tool_override: &mut ToolOverride) {
                let options = self;
                $(limit_keys!(@override $in, tool_override, options, $key, $kind);)*
            }
        }

        /// Every limit key, in the order of the declaration, of [`LimitsOptions`] and of the
        /// JSON reports.
        pub(crate) const LIMIT_KEYS: &[LimitKey<LimitsOptions, RawLimits, RawTool>] = &[$(
            LimitKey {
                name: stringify!($key),
                config_key: concat!("limits.", stringify!($key)),
                doc: concat!($($doc, "\n",)*),
                loosens: Loosens::$loosens,
                unlimited: <limit_kind::$kind as LimitKind>::UNLIMITED,
                default: || <limit_kind::$kind as LayerValue>::show_value(
                    limit_keys!(@default $in, $key $(, $default)?),
                ),
                env: limit_keys!(@env $env),
                doctor_rank: $rank,
                is_set: |options| options.$key.is_some(),
                parse: |options, text| {
                    options.$key = Some(<limit_kind::$kind as LayerValue>::parse(text)?);
                    Ok(())
                },
                describe: |options| options.$key.map(<limit_kind::$kind as LayerValue>::show),
                resolved: limit_keys!(@resolved $in, $key, $kind),
                tighten: |project, user| {
                    let (wanted, applied) = loosening::<limit_kind::$kind>(
                        Loosens::$loosens,
                        project.$key?,
                        user.$key,
                        limit_keys!(@default $in, $key $(, $default)?),
                    )?;
                    project.$key = None;
                    Some((wanted, applied))
                },
                in_limits: |raw| &raw.$key,
                in_tool: limit_keys!(@in_tool $tool, $key),
            },
        )*];
    };
}

toolsmith_registry::with_limit_keys! { limit_keys {} }

/// The reference table of the limit keys in `docs/operators.md`, between its markers:
/// generated by `cargo xtask codegen` from `keys`, one row per key.
pub(crate) fn limits_reference<O, R, T>(keys: &[LimitKey<O, R, T>]) -> String {
    let mut table = String::from(
        "| key | default | in `[tools.NAME]` | variable | a project config may not make it | meaning |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for key in keys {
        table.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} | {} |\n",
            key.name,
            (key.default)(),
            if key.in_tool.is_some() { "yes" } else { "no" },
            key.env
                .map_or_else(|| "none".to_owned(), |name| format!("`{name}`")),
            key.loosens.describe(key.unlimited),
            first_sentence(key.doc),
        ));
    }
    table
}

/// The first sentence of a doc comment, on one line.
fn first_sentence(doc: &str) -> String {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.find(". ") {
        Some(end) => text[..=end].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use toolsmith_registry::Loosens;

    use crate::settings::config_schema;
    use crate::settings::limits::{LIMIT_KEYS, LimitsOptions, limits_reference};
    use crate::tighten::Loosening;

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

    /// A layer that sets only `key`, to `text`.
    fn layer(key: &super::LimitKey, text: &str) -> LimitsOptions {
        let mut options = LimitsOptions::default();
        (key.parse)(&mut options, text).unwrap();
        options
    }

    /// The loosening check drops, for every key, a project's value that gives tools more than
    /// the user's (and `unlimited` where a key may be lifted), and keeps one that gives less:
    /// a key whose row left it out of the check, or declared the wrong direction, fails here.
    #[test]
    fn every_key_is_checked_for_loosening() {
        for key in LIMIT_KEYS {
            let (less, more) = match key.loosens {
                Loosens::Larger => ("1", "2"),
                Loosens::Smaller => ("2", "1"),
            };
            let mut looser = vec![more];
            if key.unlimited && key.loosens == Loosens::Larger {
                looser.push("unlimited");
            }
            for wanted in looser {
                let mut project = layer(key, wanted);
                let mut found = Vec::new();
                crate::tighten::limits(
                    LIMIT_KEYS,
                    "limits",
                    &mut project,
                    &layer(key, less),
                    &mut found,
                );
                let shown = (key.describe)(&layer(key, wanted)).unwrap_or_default();
                let expected = format!("limits.{} = {shown} would loosen", key.name);
                assert!(
                    found.len() == 1 && found[0].to_string().starts_with(&expected),
                    "{}: {wanted} over {less} gave {found:?}",
                    key.name
                );
                assert!(!(key.is_set)(&project), "{}: {wanted} kept", key.name);
            }
            let mut project = layer(key, less);
            let mut found: Vec<Loosening> = Vec::new();
            crate::tighten::limits(
                LIMIT_KEYS,
                "limits",
                &mut project,
                &layer(key, more),
                &mut found,
            );
            assert!(
                found.is_empty(),
                "{}: {less} under {more} refused",
                key.name
            );
            assert!((key.is_set)(&project), "{}: {less} dropped", key.name);
        }
    }

    /// docs/operators.md holds the reference table generated from the declaration, so a key
    /// without its row there fails here (and `cargo xtask codegen --check` in CI).
    #[test]
    fn every_key_has_its_row_in_the_reference() {
        let guide =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operators.md");
        let guide = std::fs::read_to_string(guide).unwrap();
        let table = limits_reference(LIMIT_KEYS);
        assert!(
            guide.contains(&table),
            "docs/operators.md: run `cargo xtask codegen`"
        );
        for key in LIMIT_KEYS {
            assert!(
                table.contains(&format!("\n| `{}` | `{}` |", key.name, (key.default)())),
                "{} has no row",
                key.name
            );
            let described =
                &config_schema()["$defs"]["RawLimits"]["properties"][key.name]["description"];
            assert!(
                described.as_str().is_some_and(|text| !text.is_empty()),
                "{} has no doc",
                key.name
            );
        }
    }

    /// A doc comment's `Default: `X`` is the default the code applies.
    #[test]
    fn documented_defaults_are_the_defaults() {
        for key in LIMIT_KEYS {
            let doc = key.doc.split_whitespace().collect::<Vec<_>>().join(" ");
            let Some((_, after)) = doc.split_once("Default: `") else {
                panic!("{}: its doc says no default", key.name);
            };
            let documented = after.split('`').next().unwrap_or_default();
            assert_eq!(documented, (key.default)(), "{}", key.name);
        }
    }

    /// A fixture key, declared by one row appended to the declaration and no other line, is
    /// parsed from `[limits]` and `[tools.NAME]`, combined across layers, checked for loosening
    /// and documented.
    mod fixture {
        #![expect(dead_code, reason = "the fixture's sections are parsed, not all read")]

        use super::super::*;

        use crate::settings::schema::raw_sections;

        /// The declaration with the fixture's row, the one line that declares its key.
        macro_rules! with_fixture_key {
            ($callback:ident) => {
                toolsmith_registry::with_limit_keys! { $callback {}
                    /// The most files a tool may leave behind (a test's fixture). Default: `8`.
                    max_left_files: CountCap, loosens: Larger, in: RunConfig(Some(8)),
                        tool: "The most files this tool may leave behind.",
                        env: none, doctor: 10;
                }
            };
        }

        with_fixture_key!(raw_sections);
        with_fixture_key!(limit_keys);

        fn parse(text: &str) -> LimitsOptions {
            let raw: RawLimits = toml::from_str(text).unwrap();
            let keys = LIMIT_KEYS;
            crate::settings::file::limits_options(
                keys,
                |key| Some((key.in_limits)(&raw)),
                "limits.",
                "x.toml",
            )
            .unwrap()
        }

        #[test]
        fn one_row_declares_a_key() {
            let user = parse("max_left_files = 4\nmemory = \"1GiB\"");
            assert_eq!(user.max_left_files, Some(Cap::At(4)));
            let tool: RawTool = toml::from_str("max_left_files = \"unlimited\"").unwrap();
            let tool = crate::settings::file::limits_options(
                LIMIT_KEYS,
                |key| key.in_tool.map(|in_tool| in_tool(&tool)),
                "tools.x.",
                "x.toml",
            )
            .unwrap();
            assert_eq!(tool.max_left_files, Some(Cap::Unlimited));

            let project = parse("max_left_files = 16");
            let combined = project.clone().combine(user.clone());
            assert_eq!(combined.max_left_files, Some(Cap::At(16)));
            assert_eq!(combined.memory, Some(Cap::At(1 << 30)));

            let mut found = Vec::new();
            let mut tightened = project.clone();
            crate::tighten::limits(LIMIT_KEYS, "limits", &mut tightened, &user, &mut found);
            let found: Vec<String> = found.iter().map(ToString::to_string).collect();
            assert_eq!(
                found,
                ["limits.max_left_files = 16 would loosen the user's 4; 4 applies"]
            );
            assert_eq!(tightened.max_left_files, None);
            let mut found = Vec::new();
            let mut tightened = project;
            let silent = LimitsOptions::default();
            crate::tighten::limits(LIMIT_KEYS, "limits", &mut tightened, &silent, &mut found);
            assert_eq!(
                found[0].to_string(),
                "limits.max_left_files = 16 would loosen the user's 8; 8 applies"
            );

            let table = limits_reference(LIMIT_KEYS);
            assert!(
                table.contains("\n| `max_left_files` | `8` | yes | none | larger or `unlimited` | The most files a tool may leave behind (a test's fixture). |\n"),
                "{table}"
            );
            let schema = schemars::schema_for!(RawLimits).to_value();
            assert!(
                schema["properties"]["max_left_files"]["description"]
                    .as_str()
                    .is_some()
            );
            let schema = schemars::schema_for!(RawTool).to_value();
            assert_eq!(
                schema["properties"]["max_left_files"]["description"],
                "The most files this tool may leave behind."
            );
        }
    }
}
