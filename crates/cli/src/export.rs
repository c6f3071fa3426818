//! Tool definitions in the exact shapes LLM APIs take: MCP, OpenAI Chat Completions and Responses, Anthropic Messages, and Gemini.
//!
//! Each provider has its own envelope, name rule and schema dialect (`research/mcp.md` §5).
//! A tool that cannot be expressed for a provider is left out with the reason, never sent
//! broken: one bad tool definition fails a whole request at most providers.

use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde_json::{Map, Value, json};
use toolsmith_registry::{Approval, Tool};

/// An API to export tool definitions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Provider {
    /// MCP `tools/list` entries: `{name, title?, description, inputSchema, outputSchema?, annotations?}`, exactly as `serve` lists them.
    Mcp,
    /// OpenAI Chat Completions: `{"type": "function", "function": {name, description, parameters, strict}}`.
    Openai,
    /// OpenAI Responses: `{"type": "function", name, description, parameters, strict}`.
    OpenaiResponses,
    /// Anthropic Messages: `{name, description, input_schema}`.
    Anthropic,
    /// Gemini `functionDeclarations` with the JSON Schema in `parametersJsonSchema`.
    Gemini,
    /// Gemini `functionDeclarations` with `parameters` in Gemini's OpenAPI 3.0 subset, for
    /// APIs that lack `parametersJsonSchema` (the Live API, older SDKs).
    GeminiOpenapi,
}

/// How to export.
#[derive(Debug, Clone)]
pub(crate) struct ExportSettings {
    pub(crate) provider: Provider,
    /// Ask for the provider's strict schema mode where a tool's schema allows it.
    pub(crate) strict: bool,
    /// Put before each tool's name, e.g. `custom_tool_`.
    pub(crate) prefix: String,
}

/// What an export produced.
#[derive(Debug)]
pub(crate) struct Export {
    /// The document to print.
    pub(crate) document: Value,
    /// Tools left out, with why.
    pub(crate) left_out: Vec<(String, String)>,
    /// Tools exported with less than was asked (e.g. not strict), with why.
    pub(crate) downgraded: Vec<(String, String)>,
}

/// Exports `tools` (already admitted by policy) for one provider.
pub(crate) fn export(tools: &[&Tool], settings: &ExportSettings) -> Export {
    let mut definitions = Vec::new();
    let mut left_out = Vec::new();
    let mut downgraded = Vec::new();
    for tool in tools {
        let name = format!("{}{}", settings.prefix, tool.name().as_str());
        match definition(tool, &name, settings) {
            Ok((definition, downgrade)) => {
                definitions.push(definition);
                if let Some(reason) = downgrade {
                    downgraded.push((name, reason));
                }
            }
            Err(reason) => left_out.push((name, reason)),
        }
    }
    let document = match settings.provider {
        Provider::Gemini | Provider::GeminiOpenapi => {
            json!({"tools": [{"functionDeclarations": definitions}]})
        }
        _ => json!({ "tools": definitions }),
    };
    Export {
        document,
        left_out,
        downgraded,
    }
}

/// One tool's definition, and why it is less than asked for, if it is.
fn definition(
    tool: &Tool,
    name: &str,
    settings: &ExportSettings,
) -> Result<(Value, Option<String>), String> {
    check_name(settings.provider, name)?;
    let schema = tool.input_schema().as_json();
    let description = tool.description();
    match settings.provider {
        Provider::Mcp => Ok((
            serde_json::to_value(mcp_tool(name, tool)).map_err(|error| error.to_string())?,
            None,
        )),
        Provider::Openai | Provider::OpenaiResponses => {
            let (parameters, strict, downgrade) = if settings.strict {
                match openai_strict(schema) {
                    Ok(strict_schema) => (strict_schema, true, None),
                    Err(reason) => (schema.clone(), false, Some(format!("not strict: {reason}"))),
                }
            } else {
                (schema.clone(), false, None)
            };
            // `strict` is always sent: the Responses API treats a missing `strict` as true
            // and then makes every optional argument mandatory.
            let function = json!({
                "name": name,
                "description": description,
                "parameters": parameters,
                "strict": strict,
            });
            let definition = if settings.provider == Provider::Openai {
                json!({"type": "function", "function": function})
            } else {
                let mut flat = json!({"type": "function"});
                if let (Some(flat), Value::Object(function)) = (flat.as_object_mut(), function) {
                    flat.extend(function);
                }
                flat
            };
            Ok((definition, downgrade))
        }
        Provider::Anthropic => {
            if let Some(keyword) = root_combinator(schema) {
                return Err(format!(
                    "Anthropic rejects `{keyword}` at the top level of input_schema"
                ));
            }
            let mut definition = json!({
                "name": name,
                "description": description,
                "input_schema": schema,
            });
            let mut downgrade = None;
            if settings.strict {
                match anthropic_strict(schema) {
                    Ok(strict_schema) => {
                        definition["input_schema"] = strict_schema;
                        definition["strict"] = Value::Bool(true);
                    }
                    Err(reason) => downgrade = Some(format!("not strict: {reason}")),
                }
            }
            Ok((definition, downgrade))
        }
        Provider::Gemini => Ok((
            json!({
                "name": name,
                "description": description,
                "parametersJsonSchema": schema,
            }),
            None,
        )),
        Provider::GeminiOpenapi => {
            let parameters = gemini_openapi(schema).map_err(|reason| {
                format!("its schema has no equivalent in Gemini's OpenAPI subset: {reason}")
            })?;
            Ok((
                json!({
                    "name": name,
                    "description": description,
                    "parameters": parameters,
                }),
                None,
            ))
        }
    }
}

/// A tool as MCP lists it: what `serve` (stdio and HTTP) answers to `tools/list`, and what
/// `export --format mcp` prints, built here once so that the two never disagree.
pub(crate) fn mcp_tool(listed_name: &str, tool: &Tool) -> rmcp::model::Tool {
    let input_schema = match tool.input_schema().as_json() {
        Value::Object(schema) => schema.clone(),
        // Registration checks that the root is an object schema; this keeps the listing valid
        // should that ever change.
        _ => JsonObject::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let mut mcp_tool = rmcp::model::Tool::new(
        listed_name.to_owned(),
        tool.description().to_owned(),
        Arc::new(input_schema),
    );
    // MCP requires an output schema to describe an object; others stay unannounced.
    if let Some(Value::Object(schema)) = tool.output_schema().map(|schema| schema.as_json())
        && schema.get("type") == Some(&json!("object"))
    {
        mcp_tool = mcp_tool.with_raw_output_schema(Arc::new(schema.clone()));
    }
    let annotations = tool.annotations();
    if let Some(title) = &annotations.title {
        mcp_tool = mcp_tool.with_title(title.clone());
    }
    if let Some(hints) = hints(tool) {
        mcp_tool = mcp_tool.with_annotations(hints);
    }
    mcp_tool
}

/// The MCP hints a tool's annotations support, if any.
///
/// MCP's defaults assume the worst (`destructiveHint` is true when absent), which is what an
/// executable's undeclared annotations mean; only a tool that declares its approval (every
/// manifest, an executable whose description says `approval`) can say that it is not
/// destructive.
fn hints(tool: &Tool) -> Option<ToolAnnotations> {
    let annotations = tool.annotations();
    // `destructiveHint` means something only for a tool that is not read-only.
    let destructive = match annotations.approval {
        _ if annotations.read_only => None,
        Approval::Destructive => Some(true),
        Approval::Never | Approval::Always if annotations.declared => Some(false),
        Approval::Never | Approval::Always => None,
    };
    if !annotations.read_only && destructive.is_none() && annotations.title.is_none() {
        return None;
    }
    let mut hints = match &annotations.title {
        Some(title) => ToolAnnotations::with_title(title.clone()),
        None => ToolAnnotations::new(),
    };
    if annotations.read_only {
        hints = hints.read_only(true);
    }
    if let Some(destructive) = destructive {
        hints = hints.destructive(destructive);
    }
    Some(hints)
}

/// Checks `name` against the provider's rule for function names.
fn check_name(provider: Provider, name: &str) -> Result<(), String> {
    let (max, allowed_extra, rule): (usize, &[char], &str) = match provider {
        Provider::Mcp => (128, &['_', '-', '.'], "1-128 of [A-Za-z0-9_.-]"),
        Provider::Openai | Provider::OpenaiResponses => (64, &['_', '-'], "^[a-zA-Z0-9_-]{1,64}$"),
        Provider::Anthropic => (128, &['_', '-'], "^[a-zA-Z0-9_-]{1,128}$"),
        Provider::Gemini | Provider::GeminiOpenapi => (
            64,
            &['_', '-', '.', ':'],
            "a letter or _ then [a-zA-Z0-9_.:-], at most 64",
        ),
    };
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || allowed_extra.contains(&c));
    let start_ok = match provider {
        Provider::Gemini | Provider::GeminiOpenapi => name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'),
        _ => true,
    };
    if name.is_empty() || name.len() > max || !chars_ok || !start_ok {
        return Err(format!("the name `{name}` breaks the rule {rule}"));
    }
    Ok(())
}

fn root_combinator(schema: &Value) -> Option<&'static str> {
    ["oneOf", "anyOf", "allOf"]
        .into_iter()
        .find(|keyword| schema.get(keyword).is_some())
}

/// Keywords that put a schema out of OpenAI's strict mode.
const OPENAI_STRICT_REJECTS: &[&str] = &[
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
];

/// Keywords that put a schema out of Anthropic's strict mode.
const ANTHROPIC_STRICT_REJECTS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
];

/// Keywords OpenAI's strict mode does not take that only narrow what is valid (or annotate):
/// left out of the strict schema, since toolsmith validates every call against the tool's full
/// schema and fills its defaults itself. What would widen or change the meaning is refused.
const OPENAI_STRICT_DROPS: &[&str] = &[
    "default",
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "unevaluatedProperties",
];

/// The schema for OpenAI's strict mode: every object closed (`additionalProperties: false`)
/// and every property required, an optional one as a union with `null` (how strict mode says
/// "may be left out"), without the keywords strict mode does not take.
fn openai_strict(schema: &Value) -> Result<Value, String> {
    if let Some(keyword) = root_combinator(schema) {
        return Err(format!(
            "`{keyword}` at the root is not allowed in strict mode"
        ));
    }
    let dropped = drop_keywords(schema, OPENAI_STRICT_DROPS);
    let nullable = optional_as_null(&dropped);
    strict_schema(&nullable, "", &|object, path| {
        if let Some(keyword) = OPENAI_STRICT_REJECTS
            .iter()
            .find(|keyword| object.contains_key(**keyword))
        {
            return Err(format!(
                "`{keyword}` at {} is not allowed in strict mode",
                show(path)
            ));
        }
        if object.contains_key("patternProperties") {
            return Err(format!(
                "`patternProperties` at {} allows properties strict mode cannot name",
                show(path)
            ));
        }
        Ok(())
    })
}

/// `schema` without `keywords` in any subschema (a property named like one is kept).
fn drop_keywords(schema: &Value, keywords: &[&str]) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut kept = Map::new();
    for (key, value) in object {
        if keywords.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("properties" | "$defs" | "definitions", Value::Object(children)) => Value::Object(
                children
                    .iter()
                    .map(|(name, child)| (name.clone(), drop_keywords(child, keywords)))
                    .collect(),
            ),
            ("items" | "additionalProperties", Value::Object(_)) => drop_keywords(value, keywords),
            ("anyOf" | "oneOf" | "prefixItems", Value::Array(choices)) => Value::Array(
                choices
                    .iter()
                    .map(|choice| drop_keywords(choice, keywords))
                    .collect(),
            ),
            _ => value.clone(),
        };
        kept.insert(key.clone(), value);
    }
    Value::Object(kept)
}

/// `schema` with every object's properties all required, each optional one made to accept
/// `null` too, in every subschema.
fn optional_as_null(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|required| required.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut converted = Map::new();
    for (key, value) in object {
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(children)) => Value::Object(
                children
                    .iter()
                    .map(|(name, child)| {
                        let child = optional_as_null(child);
                        let child = if required.contains(&name.as_str()) {
                            child
                        } else {
                            or_null(child)
                        };
                        (name.clone(), child)
                    })
                    .collect(),
            ),
            ("$defs" | "definitions", Value::Object(children)) => Value::Object(
                children
                    .iter()
                    .map(|(name, child)| (name.clone(), optional_as_null(child)))
                    .collect(),
            ),
            ("items", Value::Object(_)) => optional_as_null(value),
            ("anyOf" | "oneOf", Value::Array(choices)) => {
                Value::Array(choices.iter().map(optional_as_null).collect())
            }
            _ => value.clone(),
        };
        converted.insert(key.clone(), value);
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        let all: Vec<Value> = properties.keys().cloned().map(Value::from).collect();
        converted.insert("required".to_owned(), Value::Array(all));
    }
    Value::Object(converted)
}

/// `schema` that also accepts `null`: `null` added to its `type` (and to its `enum`, which
/// would refuse it otherwise), or, for a schema with no single type, a union with `null`.
fn or_null(schema: Value) -> Value {
    let null = Value::from("null");
    let Value::Object(mut object) = schema else {
        return json!({"anyOf": [schema, {"type": "null"}]});
    };
    let typed = match object.get_mut("type") {
        Some(Value::String(name)) => {
            let name = Value::from(name.clone());
            if name != null {
                let both = Value::Array(vec![name, null.clone()]);
                object.insert("type".to_owned(), both);
            }
            true
        }
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null.clone());
            }
            true
        }
        _ => false,
    };
    let plain = typed
        && ["anyOf", "oneOf", "const", "$ref"]
            .iter()
            .all(|keyword| !object.contains_key(*keyword));
    if !plain {
        // Keep the description at the property, where the model reads it.
        let description = object.remove("description");
        let mut union = json!({"anyOf": [Value::Object(object), {"type": "null"}]});
        if let Some(description) = description {
            union["description"] = description;
        }
        return union;
    }
    if let Some(Value::Array(values)) = object.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    Value::Object(object)
}

/// The schema for Anthropic's strict mode: every object closed, with none of the keywords
/// it does not support.
fn anthropic_strict(schema: &Value) -> Result<Value, String> {
    strict_schema(schema, "", &|object, path| {
        if let Some(keyword) = ANTHROPIC_STRICT_REJECTS
            .iter()
            .find(|keyword| object.contains_key(**keyword))
        {
            return Err(format!(
                "`{keyword}` at {} is not supported in strict mode",
                show(path)
            ));
        }
        if object
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|min_items| min_items > 1)
        {
            return Err(format!(
                "`minItems` above 1 at {} is not supported in strict mode",
                show(path)
            ));
        }
        Ok(())
    })
}

fn show(path: &str) -> &str {
    if path.is_empty() { "the root" } else { path }
}

/// A provider's test of one subschema (its keywords, and its path for the message).
type StrictCheck = dyn Fn(&Map<String, Value>, &str) -> Result<(), String>;

/// Walks every subschema, lets `check` refuse it, and closes every object schema with
/// `additionalProperties: false` (refusing one that allows more).
fn strict_schema(schema: &Value, path: &str, check: &StrictCheck) -> Result<Value, String> {
    let Value::Object(object) = schema else {
        return Ok(schema.clone());
    };
    check(object, path)?;
    let mut strict = Map::new();
    for (key, value) in object {
        let child_path = format!("{path}/{key}");
        let converted = match (key.as_str(), value) {
            ("properties" | "$defs" | "definitions", Value::Object(children)) => {
                let mut converted = Map::new();
                for (name, child) in children {
                    converted.insert(
                        name.clone(),
                        strict_schema(child, &format!("{child_path}/{name}"), check)?,
                    );
                }
                Value::Object(converted)
            }
            ("items", Value::Object(_)) => strict_schema(value, &child_path, check)?,
            ("anyOf" | "oneOf", Value::Array(choices)) => Value::Array(
                choices
                    .iter()
                    .enumerate()
                    .map(|(index, choice)| {
                        strict_schema(choice, &format!("{child_path}/{index}"), check)
                    })
                    .collect::<Result<_, _>>()?,
            ),
            _ => value.clone(),
        };
        strict.insert(key.clone(), converted);
    }
    let is_object = match object.get("type") {
        Some(Value::String(name)) => name == "object",
        Some(Value::Array(names)) => names.contains(&json!("object")),
        _ => false,
    } || object.contains_key("properties");
    if is_object {
        match object.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {
                strict.insert("additionalProperties".to_owned(), Value::Bool(false));
            }
            Some(_) => {
                return Err(format!(
                    "the object at {} allows additional properties, which strict mode forbids",
                    show(path)
                ));
            }
        }
    }
    Ok(Value::Object(strict))
}

/// JSON Schema keywords Gemini's OpenAPI subset keeps as they are.
const GEMINI_KEPT: &[&str] = &[
    "format",
    "title",
    "description",
    "nullable",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "default",
    "example",
    "propertyOrdering",
    "required",
];

/// JSON Schema keywords whose meaning Gemini's subset cannot carry: dropping them would
/// change which arguments the model may produce.
const GEMINI_UNEXPRESSIBLE: &[&str] = &[
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "$defs",
    "definitions",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "prefixItems",
    "contains",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Converts a JSON Schema to Gemini's OpenAPI 3.0 subset. Keywords that only tighten
/// validation (`additionalProperties`, `exclusiveMinimum`, ...) are dropped, since toolsmith
/// validates every call against the full schema anyway; unknown keys would fail the whole
/// request and are dropped too; keywords that change what is allowed are refused.
fn gemini_openapi(schema: &Value) -> Result<Value, String> {
    gemini_schema(schema, "")
}

fn gemini_schema(schema: &Value, path: &str) -> Result<Value, String> {
    let Value::Object(object) = schema else {
        return Err(format!("the schema at {} is not an object", show(path)));
    };
    if let Some(keyword) = GEMINI_UNEXPRESSIBLE
        .iter()
        .find(|keyword| object.contains_key(**keyword))
    {
        return Err(format!("`{keyword}` at {}", show(path)));
    }
    let mut converted = Map::new();
    match object.get("type") {
        Some(Value::String(kind)) => {
            converted.insert("type".to_owned(), json!(kind.to_ascii_uppercase()));
        }
        Some(Value::Array(kinds)) => {
            let non_null: Vec<&str> = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|kind| *kind != "null")
                .collect();
            let [single] = non_null.as_slice() else {
                return Err(format!("the type union {} at {}", json!(kinds), show(path)));
            };
            converted.insert("type".to_owned(), json!(single.to_ascii_uppercase()));
            if non_null.len() < kinds.len() {
                converted.insert("nullable".to_owned(), Value::Bool(true));
            }
        }
        _ => {}
    }
    for (key, value) in object {
        let child_path = format!("{path}/{key}");
        match key.as_str() {
            "properties" => {
                let Value::Object(children) = value else {
                    continue;
                };
                let mut properties = Map::new();
                for (name, child) in children {
                    properties.insert(
                        name.clone(),
                        gemini_schema(child, &format!("{child_path}/{name}"))?,
                    );
                }
                converted.insert("properties".to_owned(), Value::Object(properties));
            }
            "items" => {
                converted.insert("items".to_owned(), gemini_schema(value, &child_path)?);
            }
            "anyOf" => {
                let Value::Array(choices) = value else {
                    continue;
                };
                let choices = choices
                    .iter()
                    .enumerate()
                    .map(|(index, choice)| gemini_schema(choice, &format!("{child_path}/{index}")))
                    .collect::<Result<Vec<_>, _>>()?;
                converted.insert("anyOf".to_owned(), Value::Array(choices));
            }
            "enum" => {
                let Some(values) = value
                    .as_array()
                    .filter(|values| values.iter().all(Value::is_string))
                else {
                    return Err(format!("a non-string `enum` at {}", show(path)));
                };
                converted.insert("enum".to_owned(), Value::Array(values.clone()));
            }
            "const" => {
                let Value::String(constant) = value else {
                    return Err(format!("a non-string `const` at {}", show(path)));
                };
                converted.insert("enum".to_owned(), json!([constant]));
            }
            kept if GEMINI_KEPT.contains(&kept) => {
                converted.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    Ok(Value::Object(converted))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::export::{Provider, anthropic_strict, check_name, gemini_openapi, openai_strict};

    fn check(converted: Result<Value, String>, expect: Result<Value, &str>) {
        match (converted, expect) {
            (Ok(actual), Ok(expected)) => assert_eq!(actual, expected),
            (Err(actual), Err(fragment)) => assert!(actual.contains(fragment), "{actual}"),
            (actual, expected) => panic!("got {actual:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn openai_strict_closes_objects_when_everything_is_required() {
        check(
            openai_strict(
                &json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            ),
            Ok(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}),
            ),
        );
    }

    #[test]
    fn openai_strict_makes_optional_properties_nullable_and_required() {
        check(
            openai_strict(&json!({"type": "object", "properties": {
                "a": {"type": "string", "default": "x", "minLength": 1},
                "e": {"type": "string", "enum": ["p", "q"]},
                "u": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "d"},
                "o": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                "r": {"type": "integer"}
            }, "required": ["r"]})),
            Ok(json!({"type": "object", "properties": {
                "a": {"type": ["string", "null"]},
                "e": {"type": ["string", "null"], "enum": ["p", "q", null]},
                "u": {"anyOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "null"}], "description": "d"},
                "o": {"type": ["object", "null"], "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false},
                "r": {"type": "integer"}
            }, "required": ["a", "e", "u", "o", "r"], "additionalProperties": false})),
        );
    }

    #[test]
    fn openai_strict_refuses_rejected_keywords() {
        check(
            openai_strict(
                &json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}, "required": ["a"]}),
            ),
            Err("`allOf` at /properties/a"),
        );
        check(
            openai_strict(&json!({"type": "object", "additionalProperties": true})),
            Err("allows additional properties"),
        );
    }

    #[test]
    fn anthropic_strict_refuses_bounds() {
        check(
            anthropic_strict(
                &json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}),
            ),
            Err("`maximum` at /properties/n"),
        );
        check(
            anthropic_strict(&json!({"type": "object", "properties": {"s": {"type": "string"}}})),
            Ok(
                json!({"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": false}),
            ),
        );
    }

    #[test]
    fn gemini_openapi_converts_types_and_drops_what_only_tightens() {
        check(
            gemini_openapi(&json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "mode": {"const": "fast"},
                    "count": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
                },
                "required": ["mode"]
            })),
            Ok(json!({
                "type": "OBJECT",
                "properties": {
                    "mode": {"enum": ["fast"]},
                    "count": {"type": "INTEGER", "nullable": true},
                    "tags": {"type": "ARRAY", "items": {"type": "STRING", "enum": ["a", "b"]}}
                },
                "required": ["mode"]
            })),
        );
    }

    #[test]
    fn gemini_openapi_refuses_what_it_cannot_say() {
        check(
            gemini_openapi(
                &json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}),
            ),
            Err("`oneOf` at /properties/a"),
        );
        check(
            gemini_openapi(&json!({"type": "object", "properties": {"n": {"enum": [1, 2]}}})),
            Err("non-string `enum` at /properties/n"),
        );
        check(
            gemini_openapi(
                &json!({"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}),
            ),
            Err("type union"),
        );
    }

    #[test]
    fn names_follow_each_rule() {
        assert!(check_name(Provider::Openai, "custom_tool_hello").is_ok());
        assert!(check_name(Provider::Openai, &"x".repeat(65)).is_err());
        assert!(check_name(Provider::Openai, "a.b").is_err());
        assert!(check_name(Provider::Mcp, "a.b").is_ok());
        assert!(check_name(Provider::Gemini, "9lives").is_err());
        assert!(check_name(Provider::Anthropic, &"x".repeat(128)).is_ok());
    }
}
