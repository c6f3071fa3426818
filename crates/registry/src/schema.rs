//! Input and output schemas: the JSON Schemas a tool declares, checked against the rules every LLM API shares, compiled once, and used to validate and complete every call.
//!
//! Rules at registration, in the order they apply, each named in its rejection:
//! - the schema is a JSON object;
//! - an input schema's root declares `"type": "object"` (every LLM API requires it of tool parameters);
//! - an input schema's root has no `oneOf`, `anyOf` or `allOf` (Anthropic rejects them at the top level, and one bad tool would fail a whole request);
//! - the schema conforms to its JSON Schema meta-schema (the draft its `$schema` names, 2020-12 when it names none);
//! - the schema is at most [`MAX_SCHEMA_BYTES`] of JSON, nested at most [`MAX_SCHEMA_DEPTH`] deep, and each `pattern` (and `patternProperties` key) is at most [`MAX_PATTERN_BYTES`];
//! - the schema compiles (e.g. its local `$ref`s resolve and its `pattern`s are regular expressions).
//!
//! Patterns are bounded when they run, too: a pattern that backtracks (backreferences, lookaround)
//! gives up after [`PATTERN_BACKTRACK_LIMIT`] steps and the value fails validation with that
//! reason; any other pattern runs on a linear-time engine. A call's arguments are refused
//! before validation when they exceed [`MAX_ARGUMENTS_BYTES`] or [`MAX_ARGUMENTS_DEPTH`].

use std::fmt;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Value};

/// The root keywords an input schema may not have: LLM APIs reject combinators at the top level.
const ROOT_COMBINATORS: [&str; 3] = ["oneOf", "anyOf", "allOf"];

/// The largest schema accepted, in bytes of compact JSON: generous for any real tool (the
/// largest schemas LLM hosts send are a few KiB), small enough that compiling and sending it to
/// every LLM request stays cheap.
pub(crate) const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// The deepest nesting of objects and arrays accepted in a schema (each level of nested
/// properties is 2: the `properties` object, then the property's schema), so 31 levels of
/// object properties.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 64;

/// The longest `pattern` (or `patternProperties` key) accepted, in bytes.
pub(crate) const MAX_PATTERN_BYTES: usize = 1024;

/// How many backtracking steps a pattern with backreferences or lookaround may take on one
/// value before the value is refused (fancy-regex; other patterns run in linear time).
pub(crate) const PATTERN_BACKTRACK_LIMIT: usize = 100_000;

/// The most memory a compiled pattern may take (the `regex` crate's size limits).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The largest arguments a call accepts, in bytes of compact JSON.
pub(crate) const MAX_ARGUMENTS_BYTES: usize = 16 * 1024 * 1024;

/// The deepest nesting of objects and arrays accepted in a call's arguments.
pub(crate) const MAX_ARGUMENTS_DEPTH: usize = 64;

/// The longest rendering of a received value in a violation; longer values are cut.
const MAX_VALUE_CHARS: usize = 60;

/// The most violations of one value described; the rest are counted in one more line.
pub(crate) const MAX_VIOLATIONS: usize = 20;

/// A tool's input schema: a JSON object schema (`"type": "object"`), checked
/// against its meta-schema and the LLM APIs' rules, and compiled when the
/// tool is discovered.
///
/// Besides validating arguments, it fills in defaults ([`InputSchema::with_defaults`]).
#[derive(Clone)]
pub struct InputSchema {
    value: Value,
    validator: jsonschema::Validator,
}

/// Why a declared schema was refused. Each message names the rule it breaks.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not a JSON object.
    #[error("the schema must be a JSON object, not {found}")]
    NotAnObject {
        /// The JSON type that was found instead.
        found: &'static str,
    },
    /// The root does not describe an object (`"type": "object"`), which
    /// every LLM API requires of tool parameters.
    #[error(
        "the schema's root must have \"type\": \"object\" (LLM APIs require it), found {found}"
    )]
    NotObjectType {
        /// The `type` that was found, as JSON, or `no type`.
        found: String,
    },
    /// The root combines schemas with `oneOf`, `anyOf` or `allOf`, which LLM
    /// APIs reject at the top level.
    #[error(
        "the schema's root may not use `{keyword}` (LLM APIs reject oneOf, anyOf and allOf at the top level); move it into a property"
    )]
    RootCombinator {
        /// The combinator found at the root.
        keyword: &'static str,
    },
    /// The schema names a meta-schema (`$schema`) that is not a known JSON Schema draft.
    #[error("the schema's `$schema` is not a known JSON Schema draft")]
    UnknownMetaSchema {
        /// The resolver's error.
        #[source]
        source: jsonschema::ValidationError<'static>,
    },
    /// The schema breaks its JSON Schema meta-schema, e.g. a misspelt type
    /// name or a negative `minLength`.
    #[error("the schema is not valid JSON Schema: {}", join(violations))]
    MetaSchema {
        /// Every place where the schema breaks the meta-schema; the paths point into the schema.
        violations: Vec<Violation>,
    },
    /// The schema is larger than `MAX_SCHEMA_BYTES`.
    #[error("the schema takes {bytes} bytes of JSON, more than the limit of {MAX_SCHEMA_BYTES}")]
    TooLarge {
        /// Its size in compact JSON.
        bytes: usize,
    },
    /// The schema nests deeper than `MAX_SCHEMA_DEPTH`.
    #[error("the schema nests objects and arrays deeper than the limit of {MAX_SCHEMA_DEPTH}")]
    TooDeep,
    /// A `pattern` is longer than `MAX_PATTERN_BYTES`.
    #[error(
        "a pattern at {path} is {bytes} bytes long, more than the limit of {MAX_PATTERN_BYTES}"
    )]
    PatternTooLong {
        /// The JSON pointer of the pattern in the schema.
        path: String,
        /// Its length.
        bytes: usize,
    },
    /// The schema could not be compiled.
    #[error("the schema cannot be compiled")]
    Compile {
        /// The compiler's error.
        #[source]
        source: jsonschema::ValidationError<'static>,
    },
}

/// One way in which a JSON value fails a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The JSON pointer of the failing value; empty for the root.
    pub instance_path: String,
    /// The schema keyword that failed, e.g. `required` or `type`.
    pub keyword: String,
    /// What was expected and what was received, e.g.
    /// `expected integer, got "x" (a string)`.
    pub message: String,
}

impl fmt::Display for Violation {
    /// `/age: expected integer, got "x" (a string)`; the root is `/`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(f, "{path}: {}", self.message)
    }
}

fn join(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl InputSchema {
    /// Checks `value` against the rules of registration and compiles it.
    pub fn new(value: Value) -> Result<InputSchema, SchemaError> {
        let Some(object) = value.as_object() else {
            return Err(SchemaError::NotAnObject {
                found: json_type(&value),
            });
        };
        match object.get("type") {
            Some(Value::String(kind)) if kind == "object" => {}
            Some(other) => {
                return Err(SchemaError::NotObjectType {
                    found: other.to_string(),
                });
            }
            None => {
                return Err(SchemaError::NotObjectType {
                    found: "no type".to_owned(),
                });
            }
        }
        if let Some(keyword) = ROOT_COMBINATORS
            .into_iter()
            .find(|keyword| object.contains_key(*keyword))
        {
            return Err(SchemaError::RootCombinator { keyword });
        }
        let validator = compile(&value)?;
        Ok(InputSchema { value, validator })
    }

    /// The schema of a tool that declares none: any object.
    pub fn any_object() -> InputSchema {
        let value = serde_json::json!({"type": "object"});
        let validator = jsonschema::validator_for(&value)
            .expect("`{\"type\": \"object\"}` is a valid JSON Schema");
        InputSchema { value, validator }
    }

    /// The schema as the tool declared it.
    pub fn as_json(&self) -> &Value {
        &self.value
    }

    /// Every way in which `arguments` fails the schema; empty when they are valid.
    ///
    /// Arguments larger than `MAX_ARGUMENTS_BYTES` or deeper than `MAX_ARGUMENTS_DEPTH`
    /// get that one violation and are not validated further.
    pub fn violations(&self, arguments: &Value) -> Vec<Violation> {
        let bytes = json_len(arguments);
        if bytes > MAX_ARGUMENTS_BYTES {
            return vec![Violation {
                instance_path: String::new(),
                keyword: "maxBytes".to_owned(),
                message: format!(
                    "the arguments take {bytes} bytes of JSON, more than the limit of {MAX_ARGUMENTS_BYTES}"
                ),
            }];
        }
        if exceeds_depth(arguments, MAX_ARGUMENTS_DEPTH) {
            return vec![Violation {
                instance_path: String::new(),
                keyword: "maxDepth".to_owned(),
                message: format!(
                    "the arguments nest objects and arrays deeper than the limit of {MAX_ARGUMENTS_DEPTH}"
                ),
            }];
        }
        violations(&self.validator, arguments)
    }

    /// `arguments` with the declared defaults filled in: every property
    /// that has a `default` and is absent gets it, at the top level and in
    /// nested objects whose parent is present (sent, or itself filled in
    /// from a default). A property sent as `null` is present and keeps `null`,
    /// except an optional one whose schema refuses `null` (a `type` without
    /// `null`): that is how OpenAI's strict mode (`export --strict`) says "left
    /// out", so it is taken as absent and gets its default, if any.
    ///
    /// Defaults are not filled in through array `items`, `$ref`, or
    /// `oneOf`/`anyOf`/`allOf`/`if` branches: which branch applies, or how
    /// many items there should be, is not known before validation. Arguments
    /// that are not an object are returned as they are (validation rejects them).
    pub fn with_defaults(&self, arguments: &Value) -> Value {
        let mut filled = arguments.clone();
        fill_defaults(&self.value, &mut filled);
        filled
    }
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InputSchema").field(&self.value).finish()
    }
}

/// Adds the `default` of every property of `schema` that `instance` lacks,
/// then recurses into the properties `instance` has.
fn fill_defaults(schema: &Value, instance: &mut Value) {
    let (Some(properties), Some(instance)) = (
        schema.get("properties").and_then(Value::as_object),
        instance.as_object_mut(),
    ) else {
        return;
    };
    let required = |name: &str| {
        schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|entry| entry == name))
    };
    for (name, property_schema) in properties {
        if instance.get(name).is_some_and(Value::is_null)
            && !required(name)
            && refuses_null(property_schema)
        {
            instance.remove(name);
        }
        if !instance.contains_key(name)
            && let Some(default) = property_schema.get("default")
        {
            instance.insert(name.clone(), default.clone());
        }
        // A default object is completed like one the caller sent.
        if let Some(present) = instance.get_mut(name) {
            fill_defaults(property_schema, present);
        }
    }
}

/// Whether `schema` certainly refuses `null`: it names a `type` that is not
/// `null`, and no `enum`, `const` or combinator that could let `null` in.
fn refuses_null(schema: &Value) -> bool {
    let typed_without_null = match schema.get("type") {
        Some(Value::String(name)) => name != "null",
        Some(Value::Array(names)) => !names.iter().any(|name| name == "null"),
        _ => false,
    };
    typed_without_null
        && ["enum", "const", "anyOf", "oneOf", "allOf", "$ref", "if"]
            .iter()
            .all(|keyword| schema.get(keyword).is_none())
}

/// The schema a tool's JSON result must meet, when the tool declares one
/// (ikigai's `returns`, or an `output_schema`). A result that fails it is
/// `INVALID_OUTPUT`.
///
/// It must be a valid JSON Schema object; the root rules of input schemas do
/// not apply, since results need not be objects.
#[derive(Clone)]
pub struct OutputSchema {
    value: Value,
    validator: jsonschema::Validator,
}

impl OutputSchema {
    /// Checks and compiles `value`, which must be a JSON object.
    pub fn new(value: Value) -> Result<OutputSchema, SchemaError> {
        if !value.is_object() {
            return Err(SchemaError::NotAnObject {
                found: json_type(&value),
            });
        }
        let validator = compile(&value)?;
        Ok(OutputSchema { value, validator })
    }

    /// The schema as the tool declared it.
    pub fn as_json(&self) -> &Value {
        &self.value
    }

    /// Every way in which `result` fails the schema; empty when it is valid.
    pub fn violations(&self, result: &Value) -> Vec<Violation> {
        violations(&self.validator, result)
    }
}

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.value).finish()
    }
}

/// Checks `schema` against its meta-schema, reporting every violation with
/// its place in the schema, then compiles it.
fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    check_bounds(schema)?;
    let meta = jsonschema::meta::validator_for(schema)
        .map_err(|source| SchemaError::UnknownMetaSchema { source })?;
    let meta_violations = described(meta.iter_errors(schema));
    if !meta_violations.is_empty() {
        return Err(SchemaError::MetaSchema {
            violations: meta_violations,
        });
    }
    jsonschema::options()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(PATTERN_BACKTRACK_LIMIT)
                .size_limit(PATTERN_SIZE_LIMIT)
                .dfa_size_limit(PATTERN_SIZE_LIMIT),
        )
        .build(schema)
        .map_err(|source| SchemaError::Compile { source })
}

/// The bounds on size, depth and pattern length, checked before anything else looks at the
/// schema.
fn check_bounds(schema: &Value) -> Result<(), SchemaError> {
    let bytes = json_len(schema);
    if bytes > MAX_SCHEMA_BYTES {
        return Err(SchemaError::TooLarge { bytes });
    }
    if exceeds_depth(schema, MAX_SCHEMA_DEPTH) {
        return Err(SchemaError::TooDeep);
    }
    check_patterns(schema, &mut String::new())
}

fn check_patterns(value: &Value, path: &mut String) -> Result<(), SchemaError> {
    let too_long = |path: &str, bytes: usize| SchemaError::PatternTooLong {
        path: if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        },
        bytes,
    };
    match value {
        Value::Object(object) => {
            for (key, field) in object {
                let depth = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (key.as_str(), field) {
                    ("pattern", Value::String(pattern)) if pattern.len() > MAX_PATTERN_BYTES => {
                        return Err(too_long(path, pattern.len()));
                    }
                    ("patternProperties", Value::Object(patterns)) => {
                        if let Some(pattern) = patterns
                            .keys()
                            .find(|pattern| pattern.len() > MAX_PATTERN_BYTES)
                        {
                            return Err(too_long(path, pattern.len()));
                        }
                    }
                    _ => {}
                }
                check_patterns(field, path)?;
                path.truncate(depth);
            }
            Ok(())
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let depth = path.len();
                path.push_str(&format!("/{index}"));
                check_patterns(item, path)?;
                path.truncate(depth);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The length of `value` as compact JSON, without building the text.
fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` into a writer that never fails cannot fail.
    let _ignored = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Whether objects and arrays in `value` nest deeper than `limit` (a scalar is depth 0, `{}`
/// is 1). Iterative, so a value nested far deeper than the stack allows is measured safely.
fn exceeds_depth(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0_usize)];
    while let Some((current, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match current {
            Value::Object(object) => Box::new(object.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

/// Every violation, ordered by path (the root first) so that messages are
/// stable and read from the outside in.
fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<Violation> {
    let mut violations = described(validator.iter_errors(instance));
    violations.sort_by(|left, right| left.instance_path.cmp(&right.instance_path));
    violations
}

/// The first [`MAX_VIOLATIONS`] of `errors` described, and a count of the rest.
///
/// Each error of some keywords (`propertyNames`, `additionalProperties`) refers to the whole
/// object it is about: describing 20 000 of them, each with a look at that object, took
/// minutes. The rest are only counted.
fn described<'a>(
    mut errors: impl Iterator<Item = jsonschema::ValidationError<'a>>,
) -> Vec<Violation> {
    let mut violations: Vec<Violation> = errors
        .by_ref()
        .take(MAX_VIOLATIONS)
        .map(violation)
        .collect();
    let more = errors.count();
    if more > 0 {
        violations.push(Violation {
            instance_path: String::new(),
            keyword: "more".to_owned(),
            message: format!(
                "and {more} more {} not listed",
                plural(more as u64, "violation")
            ),
        });
    }
    violations
}

/// Says what was expected and what was received, for the keywords callers
/// (and LLMs) meet most; the rest keep the validator's own sentence.
fn violation(error: jsonschema::ValidationError<'_>) -> Violation {
    let instance: &Value = error.instance();
    let got = render(instance);
    let message = match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(single) => single.to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|single| single.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!("expected {expected}, got {got} ({})", json_type(instance))
        }
        ValidationErrorKind::Required { property } => {
            format!("missing required property {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let names: Vec<String> = unexpected
                .iter()
                .map(|name| Value::String(name.clone()).to_string())
                .collect();
            let noun = if names.len() == 1 {
                "property"
            } else {
                "properties"
            };
            format!(
                "unexpected {noun} {} (the schema allows no others)",
                names.join(", ")
            )
        }
        ValidationErrorKind::Enum { options } => {
            format!("expected one of {options}, got {got}")
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!("expected {expected_value}, got {got}")
        }
        ValidationErrorKind::Minimum { limit } => format!("expected at least {limit}, got {got}"),
        ValidationErrorKind::Maximum { limit } => format!("expected at most {limit}, got {got}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("expected more than {limit}, got {got}")
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("expected less than {limit}, got {got}")
        }
        ValidationErrorKind::MinLength { limit } => {
            format!(
                "expected at least {limit} {}, got {got}",
                plural(*limit, "character")
            )
        }
        ValidationErrorKind::MaxLength { limit } => {
            format!(
                "expected at most {limit} {}, got {got}",
                plural(*limit, "character")
            )
        }
        ValidationErrorKind::MinItems { limit } => {
            format!(
                "expected at least {limit} {}, got {}",
                plural(*limit, "item"),
                item_count(instance)
            )
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!(
                "expected at most {limit} {}, got {}",
                plural(*limit, "item"),
                item_count(instance)
            )
        }
        ValidationErrorKind::Pattern { pattern } => {
            format!("expected a string matching the pattern {pattern:?}, got {got}")
        }
        ValidationErrorKind::Format { format } => {
            format!("expected a string in the {format:?} format, got {got}")
        }
        ValidationErrorKind::AnyOf { .. } if error.instance_path().as_str().ends_with("/type") => {
            // In a meta-schema, `type` is an anyOf of a type name and a list of them.
            format!(
                "expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got {got}"
            )
        }
        _ => error.to_string(),
    };
    Violation {
        instance_path: error.instance_path().as_str().to_owned(),
        keyword: error.kind().keyword().to_owned(),
        message,
    }
}

/// `value` as compact JSON, cut to [`MAX_VALUE_CHARS`] characters.
///
/// Only the start is serialized: the value may be the whole of a large argument, named by
/// every one of its violations.
fn render(value: &Value) -> String {
    // Enough bytes for MAX_VALUE_CHARS characters of up to 4 bytes, and one more.
    let mut start = Capped {
        bytes: Vec::new(),
        room: MAX_VALUE_CHARS * 4 + 4,
    };
    // The only error is the cap, which leaves the start serialized.
    let _capped = serde_json::to_writer(&mut start, value);
    let text = String::from_utf8_lossy(&start.bytes);
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text.into_owned();
    }
    let mut cut: String = text.chars().take(MAX_VALUE_CHARS).collect();
    cut.push('…');
    cut
}

/// A writer that keeps `room` bytes and then refuses the rest.
struct Capped {
    bytes: Vec<u8>,
    room: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let kept = buf.len().min(self.room - self.bytes.len());
        if kept == 0 && !buf.is_empty() {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        self.bytes.extend_from_slice(&buf[..kept]);
        Ok(kept)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `noun`, with an `s` unless `count` is 1.
fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        noun.to_owned()
    } else {
        format!("{noun}s")
    }
}

fn item_count(value: &Value) -> usize {
    value.as_array().map_or(0, Vec::len)
}

/// The JSON type name of `value`, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `object` is itself a JSON Schema rather than a map of names to
/// schemas: its `type` is a type name or list of them, or it has no `type`
/// and its `properties` map names to schemas (objects or booleans).
///
/// Formats with a shorthand (ikigai's per-parameter `parameters`) use it to
/// tell the two apart; a shorthand parameter called `type` has an object as
/// its value, which no schema's `type` has.
pub(crate) fn is_json_schema(object: &Map<String, Value>) -> bool {
    match object.get("type") {
        Some(Value::String(_) | Value::Array(_)) => true,
        Some(_) => false,
        None => object
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| {
                properties
                    .values()
                    .all(|property| property.is_object() || property.is_boolean())
            }),
    }
}

#[cfg(test)]
mod tests;
