//! Parsing a manifest: splitting the YAML frontmatter from the body, reading every
//! frontmatter field in a fixed order and collecting each error with the field it names.

use std::time::Duration;

use serde_json::{Map, Number, Value};
use serde_norway::Value as Yaml;

use crate::formats::annotations::Approval;
use crate::formats::declared_tests::parse_tests;
use crate::formats::manifest::error::{ManifestError, ManifestErrors};
use crate::formats::manifest::expand::Expansion;
use crate::formats::manifest::model::{
    DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, Manifest, Parameter, Shell,
};
use crate::formats::manifest::parameters::{parameters_of_list, parse_parameters};
use crate::formats::manifest::render::Template;
use crate::name::ToolName;
use crate::oob::is_identifier;
use crate::sandbox::SandboxDeclaration;
use crate::schema::{InputSchema, OutputSchema};

const TOP_LEVEL_KEYS: &str = "name, description, parameters, approval, read_only, timeout_ms, cwd, env, shell, fail_on_exit, output_schema, sandbox, tests";

/// Parses `text`, the contents of a manifest whose file name makes it `file_name` (`None`: its
/// file name makes no tool name).
///
/// The frontmatter's `name` names the tool, as in Nanocoder; a file name that says otherwise
/// is a warning (in [`Manifest::warnings`]), as is a top-level key toolsmith does not know,
/// which is ignored (Nanocoder's `subscribe:`, another host's keys).
pub(crate) fn parse(text: &str, file_name: Option<&ToolName>) -> Result<Manifest, ManifestErrors> {
    let mut errors = Vec::new();
    let manifest = parse_collecting(text, file_name, &mut errors);
    match manifest {
        Some(manifest) if errors.is_empty() => Ok(manifest),
        _ => {
            if errors.is_empty() {
                errors.push(ManifestError::NoOpeningFence);
            }
            Err(ManifestErrors { errors })
        }
    }
}

/// The tool name `text`'s frontmatter declares, if it declares a valid one: what discovery
/// files a manifest under before reading it in full.
pub(crate) fn declared_name(text: &str) -> Option<ToolName> {
    let (frontmatter, _, _) = split(text).ok()?;
    let mapping = frontmatter_mapping(frontmatter, &mut Vec::new())?;
    let Some(Yaml::String(name)) = mapping.get("name") else {
        return None;
    };
    well_formed(name)
        .then(|| ToolName::new(name).ok())
        .flatten()
}

/// Splits the file into the frontmatter, the body and the body's first line number.
fn split(text: &str) -> Result<(&str, &str, usize), ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(ManifestError::NoOpeningFence)?;
    if first.trim_end() != "---" {
        return Err(ManifestError::NoOpeningFence);
    }
    let mut offset = first.len();
    for (index, line) in lines.enumerate() {
        if line.trim_end() == "---" {
            let frontmatter = &text[first.len()..offset];
            let body = &text[offset + line.len()..];
            // Line 1 is the opening fence, line index + 2 the closing one.
            return Ok((frontmatter, body, index + 3));
        }
        offset += line.len();
    }
    Err(ManifestError::NoClosingFence)
}

fn parse_collecting(
    text: &str,
    file_name: Option<&ToolName>,
    errors: &mut Vec<ManifestError>,
) -> Option<Manifest> {
    let (frontmatter, body, body_line) = match split(text) {
        Ok(parts) => parts,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let mapping = frontmatter_mapping(frontmatter, errors)?;
    let mut warnings = Vec::new();
    let fields = Fields::ignoring_unknown(&mapping, TOP_LEVEL_KEYS, &mut warnings);

    let name = parse_name(&fields, file_name, errors, &mut warnings);
    let description = fields.required_text("description", errors);
    let (parameters, properties, required) = declared_parameters(&fields, errors);
    let approval = parse_approval(&fields, errors);
    let read_only = fields.boolean("read_only", errors);
    let read_only = match (approval, read_only) {
        (Some(Approval::Destructive), Some(true)) => {
            errors.push(ManifestError::DestructiveReadOnly);
            false
        }
        (_, Some(read_only)) => read_only,
        // The proposal's `!approval==always` would make a destructive tool
        // read-only; only a tool that needs no approval is assumed to only read.
        (approval, None) => approval == Some(Approval::Never),
    };
    let timeout_ms = parse_timeout(&fields, errors);
    let cwd = fields
        .string("cwd", errors)
        .and_then(|cwd| expansion("cwd", cwd, errors));
    let env = match fields.get("env") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(Yaml::Mapping(vars)) => parse_env(vars, errors),
        Some(other) => {
            errors.push(ManifestError::NotAMapping {
                field: "env".to_owned(),
                found: yaml_type(other),
            });
            Vec::new()
        }
    };
    let shell = parse_shell(&fields, errors);
    let fail_on_exit = fields.boolean("fail_on_exit", errors).unwrap_or(false);
    let output_schema = fields.get("output_schema").and_then(|schema| {
        OutputSchema::new(yaml_to_json(schema))
            .map_err(|source| errors.push(ManifestError::OutputSchema { source }))
            .ok()
    });
    let tests = match fields.get("tests") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(tests) => parse_tests(&yaml_to_json(tests))
            .map_err(|error| errors.push(ManifestError::Tests { error }))
            .unwrap_or_default(),
    };

    let sandbox = fields
        .get("sandbox")
        .and_then(|sandbox| {
            SandboxDeclaration::from_json(&yaml_to_json(sandbox))
                .map_err(|source| errors.push(ManifestError::Sandbox { source }))
                .ok()
        })
        .unwrap_or_default();

    let declared: Vec<(&str, bool)> = parameters
        .iter()
        .map(|parameter| (parameter.name.as_str(), parameter.numeric))
        .collect();
    let template = if body.trim().is_empty() {
        errors.push(ManifestError::EmptyBody);
        None
    } else {
        Template::parse(body, body_line, &declared)
            .map_err(|source| errors.push(ManifestError::Template { error: source }))
            .ok()
    };

    let input_schema = input_schema(properties, required, errors);

    Some(Manifest {
        name: name?,
        description: description?,
        parameters,
        input_schema: input_schema?,
        approval: approval?,
        read_only,
        timeout: Duration::from_millis(timeout_ms),
        cwd,
        env,
        shell,
        fail_on_exit,
        output_schema,
        sandbox,
        tests,
        body: template?,
        warnings,
    })
}

/// `name`, which names the tool; a file name that says otherwise is a warning.
fn parse_name(
    fields: &Fields<'_>,
    file_name: Option<&ToolName>,
    errors: &mut Vec<ManifestError>,
    warnings: &mut Vec<String>,
) -> Option<ToolName> {
    if fields.get("name").is_none() {
        errors.push(ManifestError::Missing {
            field: "name".to_owned(),
        });
    }
    let name = fields
        .string("name", errors)
        .and_then(|name| check_name(name, errors))?;
    if file_name != Some(&name) {
        warnings.push(match file_name {
            Some(file_name) => format!(
                "name: the tool is \"{name}\", as its frontmatter says; its file name would make it \"{file_name}\""
            ),
            None => format!(
                "name: the tool is \"{name}\", as its frontmatter says; its file name makes no tool name"
            ),
        });
    }
    Some(name)
}

/// `parameters`, a mapping or Nanocoder's list of `{name, type, ...}` objects: the parameters,
/// their schema properties and the required names.
fn declared_parameters(
    fields: &Fields<'_>,
    errors: &mut Vec<ManifestError>,
) -> (Vec<Parameter>, Map<String, Value>, Vec<String>) {
    match fields.get("parameters") {
        None | Some(Yaml::Null) => (Vec::new(), Map::new(), Vec::new()),
        Some(Yaml::Mapping(declared)) => parse_parameters(declared, errors),
        Some(Yaml::Sequence(listed)) => {
            let declared = parameters_of_list(listed, errors);
            parse_parameters(&declared, errors)
        }
        Some(other) => {
            errors.push(ManifestError::NotAMapping {
                field: "parameters".to_owned(),
                found: yaml_type(other),
            });
            (Vec::new(), Map::new(), Vec::new())
        }
    }
}

/// The input schema of the parameters: an object with their `properties` and `required` list.
fn input_schema(
    properties: Map<String, Value>,
    required: Vec<String>,
    errors: &mut Vec<ManifestError>,
) -> Option<InputSchema> {
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::from("object"));
    schema.insert("properties".to_owned(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".to_owned(), Value::from(required));
    }
    InputSchema::new(Value::Object(schema))
        .map_err(|source| errors.push(ManifestError::Schema { source }))
        .ok()
}

/// The frontmatter's YAML mapping (empty for an empty frontmatter), or `None` with the error.
fn frontmatter_mapping(
    frontmatter: &str,
    errors: &mut Vec<ManifestError>,
) -> Option<serde_norway::Mapping> {
    if let Some(line) = too_deep(frontmatter) {
        errors.push(ManifestError::TooDeep { line: line + 2 });
        return None;
    }
    let yaml: Yaml = match serde_norway::from_str(frontmatter) {
        Ok(yaml) => yaml,
        Err(error) => {
            errors.push(yaml_error(&error));
            return None;
        }
    };
    match yaml {
        Yaml::Mapping(mapping) => Some(mapping),
        // An empty frontmatter has every required key missing.
        Yaml::Null => Some(serde_norway::Mapping::new()),
        other => {
            errors.push(ManifestError::NotAMapping {
                field: "frontmatter".to_owned(),
                found: yaml_type(&other),
            });
            None
        }
    }
}

/// How deep flow collections (`[…]`, `{…}`) may nest in a frontmatter; the YAML parser's
/// time grew with the square of the depth (a 200 KB manifest took a minute).
pub(crate) const MAX_YAML_DEPTH: usize = 64;

/// How far into a line (indentation and `- ` indicators) a frontmatter's block nesting may
/// reach: `- - - - x` nests one level per indicator on a single line.
pub(crate) const MAX_YAML_INDENT: usize = 512;

/// The (0-based) frontmatter line where flow collections nest deeper than [`MAX_YAML_DEPTH`]
/// or block nesting reaches past [`MAX_YAML_INDENT`], in one pass. Quoted scalars and
/// comments are skipped; brackets in a plain scalar count, which only errs towards refusing
/// a frontmatter of 64 unclosed brackets.
fn too_deep(frontmatter: &str) -> Option<usize> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut depth = 0usize;
    let mut quote = Quote::None;
    let mut line = 0usize;
    let mut line_start = true;
    let mut indent = 0usize;
    let mut previous = '\n';
    let mut characters = frontmatter.chars();
    while let Some(character) = characters.next() {
        if line_start {
            if matches!(character, ' ' | '-' | '?' | '\t') {
                indent += 1;
                if indent > MAX_YAML_INDENT {
                    return Some(line);
                }
            } else {
                line_start = false;
            }
        }
        match (&quote, character) {
            (_, '\n') => {
                line += 1;
                line_start = true;
                indent = 0;
            }
            (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
            (Quote::Double, '\\') => {
                characters.next();
            }
            (Quote::Single | Quote::Double, _) => {}
            (Quote::None, '\'') => quote = Quote::Single,
            (Quote::None, '"') => quote = Quote::Double,
            (Quote::None, '#') if previous.is_whitespace() => {
                // A comment runs to the end of the line.
                for skipped in characters.by_ref() {
                    if skipped == '\n' {
                        line += 1;
                        line_start = true;
                        indent = 0;
                        break;
                    }
                }
                previous = '\n';
                continue;
            }
            (Quote::None, '[' | '{') => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Some(line);
                }
            }
            (Quote::None, ']' | '}') => depth = depth.saturating_sub(1),
            (Quote::None, _) => {}
        }
        previous = character;
    }
    None
}

/// `approval`: `always` when absent.
fn parse_approval(fields: &Fields<'_>, errors: &mut Vec<ManifestError>) -> Option<Approval> {
    match fields.string("approval", errors) {
        None => Some(Approval::Always),
        Some("never") => Some(Approval::Never),
        Some("always") => Some(Approval::Always),
        Some("destructive") => Some(Approval::Destructive),
        Some(other) => {
            errors.push(ManifestError::NotOneOf {
                field: "approval".to_owned(),
                expected: "never, always, destructive",
                got: format!("{other:?}"),
            });
            None
        }
    }
}

/// `timeout_ms`: the default when absent or invalid (with the error).
fn parse_timeout(fields: &Fields<'_>, errors: &mut Vec<ManifestError>) -> u64 {
    match fields.get("timeout_ms") {
        None => DEFAULT_TIMEOUT_MS,
        Some(value) => match value.as_u64() {
            Some(0) => {
                errors.push(ManifestError::TimeoutZero);
                DEFAULT_TIMEOUT_MS
            }
            Some(value) if value > MAX_TIMEOUT_MS => {
                errors.push(ManifestError::TimeoutTooLarge { value });
                DEFAULT_TIMEOUT_MS
            }
            Some(value) => value,
            None => {
                errors.push(ManifestError::WrongType {
                    field: "timeout_ms".to_owned(),
                    expected: "a positive integer of milliseconds",
                    found: yaml_type(value),
                });
                DEFAULT_TIMEOUT_MS
            }
        },
    }
}

/// `shell`: `bash` or `sh`, `None` when absent.
fn parse_shell(fields: &Fields<'_>, errors: &mut Vec<ManifestError>) -> Option<Shell> {
    match fields.string("shell", errors) {
        None => None,
        Some("bash") => Some(Shell::Bash),
        Some("sh") => Some(Shell::Sh),
        Some(other) => {
            errors.push(ManifestError::NotOneOf {
                field: "shell".to_owned(),
                expected: "bash, sh",
                got: format!("{other:?}"),
            });
            None
        }
    }
}

fn yaml_error(error: &serde_norway::Error) -> ManifestError {
    let text = error.to_string();
    match error.location() {
        Some(location) => {
            // The parser appends its own location, counted from the frontmatter.
            let message = match text.rfind(" at line ") {
                Some(index) => &text[..index],
                None => &text,
            };
            let message = renumber_lines(message);
            ManifestError::Yaml {
                line: location.line() + 1,
                column: location.column(),
                message,
            }
        }
        None => ManifestError::YamlNoLocation { message: text },
    }
}

/// `message` with every `line N` (counted from the frontmatter's first line)
/// turned into the line of the file, one more.
fn renumber_lines(message: &str) -> String {
    let mut renumbered = String::new();
    let mut rest = message;
    while let Some(index) = rest.find("line ") {
        let after = &rest[index + "line ".len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        renumbered.push_str(&rest[..index + "line ".len()]);
        match after[..digits].parse::<usize>() {
            Ok(line) => renumbered.push_str(&(line + 1).to_string()),
            Err(_) => renumbered.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    renumbered.push_str(rest);
    renumbered
}

/// Whether `name` has the form of a tool name.
fn well_formed(name: &str) -> bool {
    name.starts_with(|first: char| first.is_ascii_lowercase())
        && name.chars().all(|character| {
            character.is_ascii_lowercase() || character.is_ascii_digit() || character == '_'
        })
}

fn check_name(name: &str, errors: &mut Vec<ManifestError>) -> Option<ToolName> {
    if !well_formed(name) {
        errors.push(ManifestError::NameSyntax {
            name: name.to_owned(),
        });
        return None;
    }
    match ToolName::new(name) {
        Ok(tool_name) => Some(tool_name),
        Err(source) => {
            errors.push(ManifestError::Name { source });
            None
        }
    }
}

fn expansion(field: &str, text: &str, errors: &mut Vec<ManifestError>) -> Option<Expansion> {
    Expansion::parse(text)
        .map_err(|source| {
            errors.push(ManifestError::Expansion {
                field: field.to_owned(),
                source,
            })
        })
        .ok()
}

fn parse_env(
    vars: &serde_norway::Mapping,
    errors: &mut Vec<ManifestError>,
) -> Vec<(String, Expansion)> {
    let mut env = Vec::new();
    for (key, value) in vars {
        let Some(name) = key.as_str() else {
            errors.push(ManifestError::WrongType {
                field: "env".to_owned(),
                expected: "variable names as keys",
                found: yaml_type(key),
            });
            continue;
        };
        if !is_identifier(name) {
            errors.push(ManifestError::EnvName {
                name: name.to_owned(),
            });
            continue;
        }
        let field = format!("env.{name}");
        let text = match value {
            Yaml::String(text) => text.clone(),
            Yaml::Number(number) => number.to_string(),
            Yaml::Bool(flag) => flag.to_string(),
            other => {
                errors.push(ManifestError::WrongType {
                    field,
                    expected: "a string",
                    found: yaml_type(other),
                });
                continue;
            }
        };
        if let Some(expansion) = expansion(&field, &text, errors) {
            env.push((name.to_owned(), expansion));
        }
    }
    env
}

/// A mapping's keys, checked against the allowed ones.
pub(crate) struct Fields<'a> {
    mapping: &'a serde_norway::Mapping,
    prefix: String,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(
        mapping: &'a serde_norway::Mapping,
        prefix: &str,
        allowed: &'static str,
        errors: &mut Vec<ManifestError>,
    ) -> Fields<'a> {
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}.")
        };
        for key in mapping.keys() {
            let known = key
                .as_str()
                .is_some_and(|key| allowed.split(", ").any(|allowed_key| allowed_key == key));
            if !known {
                let text = key
                    .as_str()
                    .map_or_else(|| yaml_scalar_text(key), str::to_owned);
                errors.push(ManifestError::UnknownKey {
                    field: format!("{prefix}{text}"),
                    expected: allowed,
                    hint: key.as_str().and_then(|key| hint(key, allowed)),
                });
            }
        }
        Fields { mapping, prefix }
    }

    /// The top level's fields: a key toolsmith does not know is a warning and is ignored, as
    /// Nanocoder ignores it, so that a manifest written for another host still loads.
    fn ignoring_unknown(
        mapping: &'a serde_norway::Mapping,
        allowed: &'static str,
        warnings: &mut Vec<String>,
    ) -> Fields<'a> {
        let mut unknown = Vec::new();
        let fields = Fields::new(mapping, "", allowed, &mut unknown);
        warnings.extend(
            unknown
                .iter()
                .map(|error| format!("{error}; the key is ignored")),
        );
        fields
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Yaml> {
        self.mapping.get(key)
    }

    pub(crate) fn field(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub(crate) fn string(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<&'a str> {
        match self.get(key)? {
            Yaml::String(text) => Some(text),
            other => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "a string",
                    found: yaml_type(other),
                });
                None
            }
        }
    }

    fn required_text(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<String> {
        if self.get(key).is_none() {
            errors.push(ManifestError::Missing {
                field: self.field(key),
            });
            return None;
        }
        let text = self.string(key, errors)?;
        if text.trim().is_empty() {
            errors.push(ManifestError::Empty {
                field: self.field(key),
            });
            return None;
        }
        Some(text.trim_end().to_owned())
    }

    pub(crate) fn boolean(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<bool> {
        match self.get(key)? {
            Yaml::Bool(flag) => Some(*flag),
            other => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "true or false",
                    found: yaml_type(other),
                });
                None
            }
        }
    }

    pub(crate) fn count(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<u64> {
        let value = self.get(key)?;
        if let Some(count) = value.as_u64() {
            return Some(count);
        }
        errors.push(ManifestError::NotACount {
            field: self.field(key),
            got: yaml_scalar_text(value),
        });
        None
    }

    pub(crate) fn number(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<Number> {
        match yaml_to_json(self.get(key)?) {
            Value::Number(number) => Some(number),
            _ => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "a number",
                    found: self.get(key).map_or("nothing", yaml_type),
                });
                None
            }
        }
    }
}

/// The key an author probably meant, for the keys JSON Schema spells differently.
pub(crate) fn hint(key: &str, allowed: &str) -> Option<&'static str> {
    let hint = match key {
        "minimum" => "min",
        "maximum" => "max",
        "min_length" | "minlength" => "minLength",
        "max_length" | "maxlength" => "maxLength",
        "timeout" => "timeout_ms",
        "readonly" | "readOnly" => "read_only",
        "environment" => "env",
        "params" | "arguments" => "parameters",
        _ => return None,
    };
    allowed
        .split(", ")
        .any(|allowed_key| allowed_key == hint)
        .then_some(hint)
}

pub(crate) fn yaml_type(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "nothing",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

/// A YAML value as short text for messages.
fn yaml_scalar_text(value: &Yaml) -> String {
    yaml_to_json(value).to_string()
}

/// A YAML value as JSON: mapping keys become strings, tags are dropped,
/// non-finite floats become null (JSON has none).
pub(crate) fn yaml_to_json(value: &Yaml) -> Value {
    match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(flag) => Value::Bool(*flag),
        Yaml::Number(number) => {
            if let Some(integer) = number.as_i64() {
                Value::from(integer)
            } else if let Some(integer) = number.as_u64() {
                Value::from(integer)
            } else {
                number
                    .as_f64()
                    .and_then(Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Yaml::String(text) => Value::String(text.clone()),
        Yaml::Sequence(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Mapping(mapping) => Value::Object(
            mapping
                .iter()
                .map(|(key, value)| {
                    let key = key
                        .as_str()
                        .map_or_else(|| yaml_scalar_text(key), str::to_owned);
                    (key, yaml_to_json(value))
                })
                .collect(),
        ),
        Yaml::Tagged(tagged) => yaml_to_json(&tagged.value),
    }
}
