//! The `parameters` of a manifest's frontmatter: each parameter's type and constraints,
//! turned into the tool's input schema.

use serde_json::{Map, Value};
use serde_norway::Value as Yaml;

use crate::formats::manifest::error::ManifestError;
use crate::formats::manifest::frontmatter::{Fields, yaml_to_json, yaml_type};
use crate::formats::manifest::model::{ParamType, Parameter};
use crate::oob::{self, is_identifier};

const PARAMETER_KEYS: &str =
    "type, description, required, default, enum, pattern, minLength, maxLength, min, max, items";

const ITEMS_KEYS: &str = "type, description, enum, pattern, minLength, maxLength, min, max";

const TYPES: &str = "string, number, integer, boolean, array";

/// The mapping of Nanocoder's list form of `parameters` (`- name: x` followed by the
/// parameter's other keys), in the list's order, for [`parse_parameters`]; an entry without a
/// name, or a name given twice, is an error.
pub(crate) fn parameters_of_list(
    listed: &[Yaml],
    errors: &mut Vec<ManifestError>,
) -> serde_norway::Mapping {
    let mut declared = serde_norway::Mapping::new();
    for (index, entry) in listed.iter().enumerate() {
        let field = format!("parameters[{index}]");
        let Yaml::Mapping(entry) = entry else {
            errors.push(ManifestError::NotAMapping {
                field,
                found: yaml_type(entry),
            });
            continue;
        };
        let name = match entry.get("name") {
            Some(Yaml::String(name)) => name.clone(),
            None => {
                errors.push(ManifestError::Missing {
                    field: format!("{field}.name"),
                });
                continue;
            }
            Some(other) => {
                errors.push(ManifestError::WrongType {
                    field: format!("{field}.name"),
                    expected: "a string",
                    found: yaml_type(other),
                });
                continue;
            }
        };
        let mut rest = entry.clone();
        rest.remove("name");
        let key = Yaml::String(name.clone());
        if declared.contains_key(&key) {
            errors.push(ManifestError::DuplicateParameter { name });
            continue;
        }
        declared.insert(key, Yaml::Mapping(rest));
    }
    declared
}

/// The parameters in declaration order, their JSON Schema properties, and the required names.
pub(crate) fn parse_parameters(
    declared: &serde_norway::Mapping,
    errors: &mut Vec<ManifestError>,
) -> (Vec<Parameter>, Map<String, Value>, Vec<String>) {
    let mut parameters = Vec::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (key, value) in declared {
        let Some(name) = key.as_str() else {
            errors.push(ManifestError::WrongType {
                field: "parameters".to_owned(),
                expected: "parameter names as keys",
                found: yaml_type(key),
            });
            continue;
        };
        if !is_identifier(name) {
            errors.push(ManifestError::ParameterName {
                name: name.to_owned(),
            });
            continue;
        }
        if name.ends_with(oob::FILE_SUFFIX) {
            errors.push(ManifestError::ReservedParameterName {
                name: name.to_owned(),
            });
            continue;
        }
        let field = format!("parameters.{name}");
        let Yaml::Mapping(mapping) = value else {
            errors.push(ManifestError::NotAMapping {
                field,
                found: yaml_type(value),
            });
            continue;
        };
        let fields = Fields::new(mapping, &field, PARAMETER_KEYS, errors);
        let is_required = fields.boolean("required", errors).unwrap_or(false);
        let Some((schema, kind)) = parameter_schema(&fields, &field, false, errors) else {
            continue;
        };
        let default = fields.get("default").map(|default| {
            let default_field = format!("{field}.default");
            if is_required {
                errors.push(ManifestError::RequiredWithDefault {
                    field: default_field.clone(),
                });
            }
            let default = yaml_to_json(default);
            check_value(&default_field, &default, kind, &schema, errors);
            if let Some(Value::Array(allowed)) = schema.get("enum")
                && !allowed.contains(&default)
            {
                errors.push(ManifestError::DefaultNotInEnum {
                    field: default_field,
                    value: default.to_string(),
                });
            }
            default
        });
        let mut schema = schema;
        if let Some(default) = &default {
            schema.insert("default".to_owned(), default.clone());
        }
        if is_required {
            required.push(name.to_owned());
        }
        properties.insert(name.to_owned(), Value::Object(schema));
        parameters.push(Parameter {
            name: name.to_owned(),
            default,
            numeric: matches!(kind, ParamType::Integer | ParamType::Number),
        });
    }
    (parameters, properties, required)
}

/// The JSON Schema of one parameter (or of `items` when `is_items`), without
/// `default`; `None` when its type is unusable.
fn parameter_schema(
    fields: &Fields<'_>,
    field: &str,
    is_items: bool,
    errors: &mut Vec<ManifestError>,
) -> Option<(Map<String, Value>, ParamType)> {
    let kind = parameter_type(fields, field, is_items, errors)?;
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::from(kind.as_str()));
    if let Some(description) = fields.string("description", errors) {
        schema.insert("description".to_owned(), Value::from(description));
    }
    let is_string = kind == ParamType::String;
    let is_numeric = matches!(kind, ParamType::Number | ParamType::Integer);
    let only_for =
        |key: &str, allowed: bool, allowed_types: &'static str, errors: &mut Vec<ManifestError>| {
            let present = fields.get(key).is_some();
            if present && !allowed {
                errors.push(ManifestError::NotForType {
                    field: format!("{field}.{key}"),
                    allowed: allowed_types,
                });
            }
            present && allowed
        };
    if only_for("pattern", is_string, "string", errors)
        && let Some(pattern) = fields.string("pattern", errors)
    {
        match jsonschema::validator_for(&serde_json::json!({"pattern": pattern})) {
            Ok(_) => {
                schema.insert("pattern".to_owned(), Value::from(pattern));
            }
            Err(error) => errors.push(ManifestError::Pattern {
                field: format!("{field}.pattern"),
                reason: error.to_string(),
            }),
        }
    }
    let mut lengths = [None, None];
    for (slot, key) in ["minLength", "maxLength"].into_iter().enumerate() {
        if only_for(key, is_string, "string", errors) {
            lengths[slot] = fields.count(key, errors);
            if let Some(length) = lengths[slot] {
                schema.insert(key.to_owned(), Value::from(length));
            }
        }
    }
    if let [Some(low), Some(high)] = lengths
        && low > high
    {
        errors.push(ManifestError::Inverted {
            field: format!("{field}.minLength"),
            low: low.to_string(),
            high_key: "maxLength",
            high: high.to_string(),
        });
    }
    let mut bounds = [None, None];
    for (slot, (key, schema_key)) in [("min", "minimum"), ("max", "maximum")]
        .into_iter()
        .enumerate()
    {
        if only_for(key, is_numeric, "number or integer", errors) {
            bounds[slot] = fields.number(key, errors);
            if let Some(bound) = &bounds[slot] {
                schema.insert(schema_key.to_owned(), Value::Number(bound.clone()));
            }
        }
    }
    if let [Some(low), Some(high)] = &bounds
        && low.as_f64() > high.as_f64()
    {
        errors.push(ManifestError::Inverted {
            field: format!("{field}.min"),
            low: low.to_string(),
            high_key: "max",
            high: high.to_string(),
        });
    }
    if !is_items {
        let items_field = format!("{field}.items");
        if only_for("items", kind == ParamType::Array, "array", errors) {
            match fields.get("items") {
                Some(Yaml::Mapping(items)) => {
                    let item_fields = Fields::new(items, &items_field, ITEMS_KEYS, errors);
                    if let Some((items_schema, _)) =
                        parameter_schema(&item_fields, &items_field, true, errors)
                    {
                        schema.insert("items".to_owned(), Value::Object(items_schema));
                    }
                }
                Some(other) => errors.push(ManifestError::NotAMapping {
                    field: items_field,
                    found: yaml_type(other),
                }),
                None => {}
            }
        } else if kind == ParamType::Array {
            // Without `items`, any scalar element is accepted: each renders as one word.
            schema.insert(
                "items".to_owned(),
                serde_json::json!({"type": ["string", "number", "boolean"]}),
            );
        }
    }
    if only_for(
        "enum",
        kind != ParamType::Array,
        "string, number, integer or boolean (for arrays, put it under items)",
        errors,
    ) {
        parse_enum(fields, field, kind, &mut schema, errors);
    }
    Some((schema, kind))
}

/// The parameter's `type`; an array may not be the type of an array's items.
fn parameter_type(
    fields: &Fields<'_>,
    field: &str,
    is_items: bool,
    errors: &mut Vec<ManifestError>,
) -> Option<ParamType> {
    let type_field = format!("{field}.type");
    match fields.get("type") {
        None => {
            errors.push(ManifestError::Missing { field: type_field });
            None
        }
        Some(Yaml::String(text)) => match ParamType::parse(text) {
            Some(ParamType::Array) if is_items => {
                errors.push(ManifestError::NestedArray { field: type_field });
                None
            }
            Some(kind) => Some(kind),
            None => {
                errors.push(ManifestError::NotOneOf {
                    field: type_field,
                    expected: TYPES,
                    got: format!("{text:?}"),
                });
                None
            }
        },
        Some(other) => {
            errors.push(ManifestError::WrongType {
                field: type_field,
                expected: "a string",
                found: yaml_type(other),
            });
            None
        }
    }
}

fn parse_enum(
    fields: &Fields<'_>,
    field: &str,
    kind: ParamType,
    schema: &mut Map<String, Value>,
    errors: &mut Vec<ManifestError>,
) {
    let enum_field = format!("{field}.enum");
    let Some(value) = fields.get("enum") else {
        return;
    };
    let Yaml::Sequence(values) = value else {
        errors.push(ManifestError::WrongType {
            field: enum_field,
            expected: "a list of values",
            found: yaml_type(value),
        });
        return;
    };
    if values.is_empty() {
        errors.push(ManifestError::EmptyEnum { field: enum_field });
        return;
    }
    let mut allowed: Vec<Value> = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let value = yaml_to_json(value);
        let value_field = format!("{enum_field}[{index}]");
        if allowed.contains(&value) {
            errors.push(ManifestError::DuplicateEnum {
                field: value_field,
                value: value.to_string(),
            });
            continue;
        }
        if check_value(&value_field, &value, kind, schema, errors) {
            allowed.push(value);
        }
    }
    schema.insert("enum".to_owned(), Value::Array(allowed));
}

/// Checks an `enum` or `default` value against the parameter's type and
/// constraints (the schema so far); true when it passes.
fn check_value(
    field: &str,
    value: &Value,
    kind: ParamType,
    schema: &Map<String, Value>,
    errors: &mut Vec<ManifestError>,
) -> bool {
    if !kind.accepts(value) {
        errors.push(ManifestError::ValueType {
            field: field.to_owned(),
            value: value.to_string(),
            expected: kind,
        });
        return false;
    }
    let mut constraints = schema.clone();
    constraints.remove("enum");
    let Ok(validator) = jsonschema::validator_for(&Value::Object(constraints)) else {
        // An invalid pattern is reported on its own field.
        return true;
    };
    match validator.iter_errors(value).next() {
        None => true,
        Some(error) => {
            let at = error.instance_path().to_string();
            let message = if at.is_empty() {
                error.to_string()
            } else {
                format!("{error} (at {at})")
            };
            errors.push(ManifestError::Constraint {
                field: field.to_owned(),
                message,
            });
            false
        }
    }
}
