//! `toolsmith export`: the example tools in each LLM API's exact shape, and the tools a provider cannot take.

use crate::context::{TestContext, examples_dir, repository_root, shell_tool};

#[test]
fn mcp() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "mcp"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "custom_tool_error_tool",
          "description": "A tool that demonstrates error handling: fails on request",
          "inputSchema": {
            "type": "object",
            "properties": {
              "should_fail": {
                "type": "boolean",
                "description": "Whether the tool should fail"
              },
              "message": {
                "type": "string",
                "description": "The error message to report"
              }
            },
            "required": [
              "should_fail"
            ]
          }
        },
        {
          "name": "custom_tool_git_info",
          "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
          "inputSchema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "Repository path (default: the current directory)"
              }
            }
          }
        },
        {
          "name": "custom_tool_hello",
          "description": "Say hello to a person",
          "inputSchema": {
            "type": "object",
            "properties": {
              "name": {
                "type": "string",
                "description": "The name of the person"
              },
              "age": {
                "type": "integer",
                "description": "The age of the person"
              }
            },
            "required": [
              "name"
            ]
          }
        },
        {
          "name": "custom_tool_word_count",
          "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
          "inputSchema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "The file, relative to the project directory",
                "minLength": 1
              },
              "lines_only": {
                "type": "boolean",
                "description": "Count only the lines",
                "default": false
              }
            },
            "required": [
              "path"
            ]
          },
          "annotations": {
            "readOnlyHint": true
          }
        },
        {
          "name": "custom_tool_word_stats",
          "description": "Count the words, lines and characters of a text",
          "inputSchema": {
            "type": "object",
            "properties": {
              "text": {
                "type": "string",
                "description": "The text to measure"
              },
              "top": {
                "type": "integer",
                "description": "How many of the most frequent words to list",
                "minimum": 0,
                "default": 3
              }
            },
            "required": [
              "text"
            ]
          },
          "outputSchema": {
            "type": "object",
            "properties": {
              "words": {
                "type": "integer"
              },
              "lines": {
                "type": "integer"
              },
              "characters": {
                "type": "integer"
              },
              "most_frequent": {
                "type": "array",
                "items": {
                  "type": "string"
                }
              }
            },
            "required": [
              "words",
              "lines",
              "characters",
              "most_frequent"
            ]
          }
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn openai() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "openai"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "type": "function",
          "function": {
            "name": "custom_tool_error_tool",
            "description": "A tool that demonstrates error handling: fails on request",
            "parameters": {
              "type": "object",
              "properties": {
                "should_fail": {
                  "type": "boolean",
                  "description": "Whether the tool should fail"
                },
                "message": {
                  "type": "string",
                  "description": "The error message to report"
                }
              },
              "required": [
                "should_fail"
              ]
            },
            "strict": false
          }
        },
        {
          "type": "function",
          "function": {
            "name": "custom_tool_git_info",
            "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
            "parameters": {
              "type": "object",
              "properties": {
                "path": {
                  "type": "string",
                  "description": "Repository path (default: the current directory)"
                }
              }
            },
            "strict": false
          }
        },
        {
          "type": "function",
          "function": {
            "name": "custom_tool_hello",
            "description": "Say hello to a person",
            "parameters": {
              "type": "object",
              "properties": {
                "name": {
                  "type": "string",
                  "description": "The name of the person"
                },
                "age": {
                  "type": "integer",
                  "description": "The age of the person"
                }
              },
              "required": [
                "name"
              ]
            },
            "strict": false
          }
        },
        {
          "type": "function",
          "function": {
            "name": "custom_tool_word_count",
            "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
            "parameters": {
              "type": "object",
              "properties": {
                "path": {
                  "type": "string",
                  "description": "The file, relative to the project directory",
                  "minLength": 1
                },
                "lines_only": {
                  "type": "boolean",
                  "description": "Count only the lines",
                  "default": false
                }
              },
              "required": [
                "path"
              ]
            },
            "strict": false
          }
        },
        {
          "type": "function",
          "function": {
            "name": "custom_tool_word_stats",
            "description": "Count the words, lines and characters of a text",
            "parameters": {
              "type": "object",
              "properties": {
                "text": {
                  "type": "string",
                  "description": "The text to measure"
                },
                "top": {
                  "type": "integer",
                  "description": "How many of the most frequent words to list",
                  "minimum": 0,
                  "default": 3
                }
              },
              "required": [
                "text"
              ]
            },
            "strict": false
          }
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn openai_responses_strict() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "openai-responses", "--strict"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "type": "function",
          "name": "custom_tool_error_tool",
          "description": "A tool that demonstrates error handling: fails on request",
          "parameters": {
            "type": "object",
            "properties": {
              "should_fail": {
                "type": "boolean",
                "description": "Whether the tool should fail"
              },
              "message": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "The error message to report"
              }
            },
            "required": [
              "should_fail",
              "message"
            ],
            "additionalProperties": false
          },
          "strict": true
        },
        {
          "type": "function",
          "name": "custom_tool_git_info",
          "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
          "parameters": {
            "type": "object",
            "properties": {
              "path": {
                "type": [
                  "string",
                  "null"
                ],
                "description": "Repository path (default: the current directory)"
              }
            },
            "required": [
              "path"
            ],
            "additionalProperties": false
          },
          "strict": true
        },
        {
          "type": "function",
          "name": "custom_tool_hello",
          "description": "Say hello to a person",
          "parameters": {
            "type": "object",
            "properties": {
              "name": {
                "type": "string",
                "description": "The name of the person"
              },
              "age": {
                "type": [
                  "integer",
                  "null"
                ],
                "description": "The age of the person"
              }
            },
            "required": [
              "name",
              "age"
            ],
            "additionalProperties": false
          },
          "strict": true
        },
        {
          "type": "function",
          "name": "custom_tool_word_count",
          "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
          "parameters": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "The file, relative to the project directory"
              },
              "lines_only": {
                "type": [
                  "boolean",
                  "null"
                ],
                "description": "Count only the lines"
              }
            },
            "required": [
              "path",
              "lines_only"
            ],
            "additionalProperties": false
          },
          "strict": true
        },
        {
          "type": "function",
          "name": "custom_tool_word_stats",
          "description": "Count the words, lines and characters of a text",
          "parameters": {
            "type": "object",
            "properties": {
              "text": {
                "type": "string",
                "description": "The text to measure"
              },
              "top": {
                "type": [
                  "integer",
                  "null"
                ],
                "description": "How many of the most frequent words to list",
                "minimum": 0
              }
            },
            "required": [
              "text",
              "top"
            ],
            "additionalProperties": false
          },
          "strict": true
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn anthropic() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "anthropic"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "custom_tool_error_tool",
          "description": "A tool that demonstrates error handling: fails on request",
          "input_schema": {
            "type": "object",
            "properties": {
              "should_fail": {
                "type": "boolean",
                "description": "Whether the tool should fail"
              },
              "message": {
                "type": "string",
                "description": "The error message to report"
              }
            },
            "required": [
              "should_fail"
            ]
          }
        },
        {
          "name": "custom_tool_git_info",
          "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
          "input_schema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "Repository path (default: the current directory)"
              }
            }
          }
        },
        {
          "name": "custom_tool_hello",
          "description": "Say hello to a person",
          "input_schema": {
            "type": "object",
            "properties": {
              "name": {
                "type": "string",
                "description": "The name of the person"
              },
              "age": {
                "type": "integer",
                "description": "The age of the person"
              }
            },
            "required": [
              "name"
            ]
          }
        },
        {
          "name": "custom_tool_word_count",
          "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
          "input_schema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "The file, relative to the project directory",
                "minLength": 1
              },
              "lines_only": {
                "type": "boolean",
                "description": "Count only the lines",
                "default": false
              }
            },
            "required": [
              "path"
            ]
          }
        },
        {
          "name": "custom_tool_word_stats",
          "description": "Count the words, lines and characters of a text",
          "input_schema": {
            "type": "object",
            "properties": {
              "text": {
                "type": "string",
                "description": "The text to measure"
              },
              "top": {
                "type": "integer",
                "description": "How many of the most frequent words to list",
                "minimum": 0,
                "default": 3
              }
            },
            "required": [
              "text"
            ]
          }
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn gemini() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "gemini"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "functionDeclarations": [
            {
              "name": "custom_tool_error_tool",
              "description": "A tool that demonstrates error handling: fails on request",
              "parametersJsonSchema": {
                "type": "object",
                "properties": {
                  "should_fail": {
                    "type": "boolean",
                    "description": "Whether the tool should fail"
                  },
                  "message": {
                    "type": "string",
                    "description": "The error message to report"
                  }
                },
                "required": [
                  "should_fail"
                ]
              }
            },
            {
              "name": "custom_tool_git_info",
              "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
              "parametersJsonSchema": {
                "type": "object",
                "properties": {
                  "path": {
                    "type": "string",
                    "description": "Repository path (default: the current directory)"
                  }
                }
              }
            },
            {
              "name": "custom_tool_hello",
              "description": "Say hello to a person",
              "parametersJsonSchema": {
                "type": "object",
                "properties": {
                  "name": {
                    "type": "string",
                    "description": "The name of the person"
                  },
                  "age": {
                    "type": "integer",
                    "description": "The age of the person"
                  }
                },
                "required": [
                  "name"
                ]
              }
            },
            {
              "name": "custom_tool_word_count",
              "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
              "parametersJsonSchema": {
                "type": "object",
                "properties": {
                  "path": {
                    "type": "string",
                    "description": "The file, relative to the project directory",
                    "minLength": 1
                  },
                  "lines_only": {
                    "type": "boolean",
                    "description": "Count only the lines",
                    "default": false
                  }
                },
                "required": [
                  "path"
                ]
              }
            },
            {
              "name": "custom_tool_word_stats",
              "description": "Count the words, lines and characters of a text",
              "parametersJsonSchema": {
                "type": "object",
                "properties": {
                  "text": {
                    "type": "string",
                    "description": "The text to measure"
                  },
                  "top": {
                    "type": "integer",
                    "description": "How many of the most frequent words to list",
                    "minimum": 0,
                    "default": 3
                  }
                },
                "required": [
                  "text"
                ]
              }
            }
          ]
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn gemini_openapi() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["export", "--format", "gemini-openapi"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "functionDeclarations": [
            {
              "name": "custom_tool_error_tool",
              "description": "A tool that demonstrates error handling: fails on request",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "should_fail": {
                    "type": "BOOLEAN",
                    "description": "Whether the tool should fail"
                  },
                  "message": {
                    "type": "STRING",
                    "description": "The error message to report"
                  }
                },
                "required": [
                  "should_fail"
                ]
              }
            },
            {
              "name": "custom_tool_git_info",
              "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "path": {
                    "type": "STRING",
                    "description": "Repository path (default: the current directory)"
                  }
                }
              }
            },
            {
              "name": "custom_tool_hello",
              "description": "Say hello to a person",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "name": {
                    "type": "STRING",
                    "description": "The name of the person"
                  },
                  "age": {
                    "type": "INTEGER",
                    "description": "The age of the person"
                  }
                },
                "required": [
                  "name"
                ]
              }
            },
            {
              "name": "custom_tool_word_count",
              "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "path": {
                    "type": "STRING",
                    "description": "The file, relative to the project directory",
                    "minLength": 1
                  },
                  "lines_only": {
                    "type": "BOOLEAN",
                    "description": "Count only the lines",
                    "default": false
                  }
                },
                "required": [
                  "path"
                ]
              }
            },
            {
              "name": "custom_tool_word_stats",
              "description": "Count the words, lines and characters of a text",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "text": {
                    "type": "STRING",
                    "description": "The text to measure"
                  },
                  "top": {
                    "type": "INTEGER",
                    "description": "How many of the most frequent words to list",
                    "minimum": 0,
                    "default": 3
                  }
                },
                "required": [
                  "text"
                ]
              }
            }
          ]
        }
      ]
    }
    ----- stderr -----
    "#);
}

/// A schema with a feature Gemini's OpenAPI subset cannot express is left out there, with a
/// warning, while the same tool exports to a provider that takes it, and the other tools
/// export everywhere.
#[test]
fn a_tool_a_provider_cannot_take_is_left_out_with_a_warning() {
    let context = TestContext::new();
    context.tool(
        "plain",
        &shell_tool(
            "plain",
            r#"{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}"#,
            "true",
        ),
    );
    context.tool(
        "either",
        &shell_tool(
            "either",
            r#"{"type": "object", "properties": {"value": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}"#,
            "true",
        ),
    );
    cli_snapshot!(context, context.with_tools().args(["export", "--format", "gemini-openapi", "--prefix", ""]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "functionDeclarations": [
            {
              "name": "plain",
              "description": "The plain fixture",
              "parameters": {
                "type": "OBJECT",
                "properties": {
                  "text": {
                    "type": "STRING"
                  }
                },
                "required": [
                  "text"
                ]
              }
            }
          ]
        }
      ]
    }
    ----- stderr -----
     WARN left out either: its schema has no equivalent in Gemini's OpenAPI subset: `oneOf` at /properties/value
    "#);
    let output = context
        .with_tools()
        .args(["export", "--format", "anthropic"])
        .output()
        .unwrap();
    let exported: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = exported["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["custom_tool_either", "custom_tool_plain"]);
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = context
        .with_tools()
        .args(["export", "--format", "openai", "--strict"])
        .output()
        .unwrap();
    let exported: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let plain = &exported["tools"][1]["function"];
    assert_eq!(plain["name"], "custom_tool_plain");
    assert_eq!(
        plain["strict"], true,
        "every property of `plain` is required"
    );
    assert_eq!(plain["parameters"]["additionalProperties"], false);
    assert_eq!(exported["tools"][0]["function"]["strict"], false);
}

/// The keywords OpenAI's strict mode takes (its documented supported schemas: types,
/// `properties`/`required`/`additionalProperties`, `items`, `enum`/`const`, `anyOf`, `$ref`/
/// `$defs`, string `pattern`/`format`, number bounds and `multipleOf`, array `minItems`/
/// `maxItems`, and the annotations `description`/`title`).
const OPENAI_STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "description",
    "title",
];

/// Asserts `schema` (at `path`) obeys OpenAI's strict rules: only the keywords strict mode
/// takes, and every object closed with every property required.
fn assert_openai_strict(schema: &serde_json::Value, path: &str) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not a schema object: {schema}"));
    for key in object.keys() {
        assert!(
            OPENAI_STRICT_KEYWORDS.contains(&key.as_str()),
            "{path}: `{key}` is not taken by strict mode: {schema}"
        );
    }
    let types: Vec<&str> = match object.get("type") {
        Some(serde_json::Value::String(name)) => vec![name.as_str()],
        Some(serde_json::Value::Array(names)) => names.iter().filter_map(|n| n.as_str()).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"object") || object.contains_key("properties") {
        assert_eq!(
            object.get("additionalProperties"),
            Some(&serde_json::json!(false)),
            "{path}: an open object"
        );
        let properties = object["properties"].as_object().unwrap();
        let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
        let mut required: Vec<&str> = object["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| name.as_str().unwrap())
            .collect();
        names.sort_unstable();
        required.sort_unstable();
        assert_eq!(names, required, "{path}: not every property is required");
        for (name, child) in properties {
            assert_openai_strict(child, &format!("{path}/properties/{name}"));
        }
    }
    if let Some(items) = object.get("items") {
        assert_openai_strict(items, &format!("{path}/items"));
    }
    for (index, choice) in object
        .get("anyOf")
        .and_then(|choices| choices.as_array())
        .into_iter()
        .flatten()
        .enumerate()
    {
        assert_openai_strict(choice, &format!("{path}/anyOf/{index}"));
    }
}

/// A value the original `schema` accepts: every property it declares (`all`) or only the
/// required ones, each at its first `enum` value, its lower bounds, or a plain value of its type.
fn example_of(schema: &serde_json::Value, all: bool) -> serde_json::Value {
    use serde_json::{Value, json};
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values[0].clone();
    }
    match schema["type"].as_str().unwrap_or("object") {
        "object" => {
            let required: Vec<&Value> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|required| required.iter().collect())
                .unwrap_or_default();
            let mut example = serde_json::Map::new();
            for (name, child) in schema["properties"].as_object().into_iter().flatten() {
                if all || required.contains(&&json!(name)) {
                    example.insert(name.clone(), example_of(child, all));
                }
            }
            Value::Object(example)
        }
        "string" => json!("a".repeat(schema["minLength"].as_u64().unwrap_or(1).max(1) as usize)),
        "integer" => json!(schema["minimum"].as_i64().unwrap_or(1)),
        "number" => json!(schema["minimum"].as_f64().unwrap_or(1.5)),
        "boolean" => json!(true),
        "array" => json!([]),
        other => panic!("no example for type {other}"),
    }
}

/// Whether `value` meets the strict `schema`, for the keywords a strict schema may hold
/// (the bounds only narrow: the examples stay within the originals').
fn strict_accepts(schema: &serde_json::Value, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    if let Some(choices) = schema.get("anyOf").and_then(Value::as_array) {
        return choices.iter().any(|choice| strict_accepts(choice, value));
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(value)
    {
        return false;
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let integer_as_number = kind == "integer" && types.contains(&"number");
    if !(types.contains(&kind) || integer_as_number) {
        return false;
    }
    match value {
        Value::Object(object) => {
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let required_present = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|name| object.contains_key(name.as_str().unwrap()));
            required_present
                && object.iter().all(|(name, field)| {
                    properties
                        .get(name)
                        .is_some_and(|child| strict_accepts(child, field))
                })
        }
        Value::Array(items) => items
            .iter()
            .all(|item| strict_accepts(&schema["items"], item)),
        _ => true,
    }
}

/// Issue 26: `export --format openai --strict` makes every example and system tool strict
/// (optional parameters as required unions with `null`), each obeying OpenAI's strict rules,
/// with no warning; and the arguments the original schema accepts, with every left-out
/// optional argument sent as `null`, meet the exported schema.
#[test]
fn openai_strict_takes_every_example_and_system_tool() {
    let context = TestContext::new();
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(examples_dir())
        .arg("--tools-dir")
        .arg(repository_root().join("system-tools"))
        .args(["export", "--format", "openai", "--strict"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("WARN"), "{stderr}");
    let exported: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let tools = exported["tools"].as_array().unwrap();
    assert!(tools.len() >= 8, "{exported}");
    for tool in tools {
        let function = &tool["function"];
        let name = function["name"].as_str().unwrap();
        assert_eq!(function["strict"], true, "{name}");
        let parameters = &function["parameters"];
        assert_eq!(parameters["type"], "object", "{name}");
        assert!(parameters.get("anyOf").is_none(), "{name}");
        assert_openai_strict(parameters, name);
        // The tool's own schema, as `show --json` gives it.
        let plain = name.strip_prefix("custom_tool_").unwrap();
        let shown = context
            .command()
            .arg("--tools-dir")
            .arg(examples_dir())
            .arg("--tools-dir")
            .arg(repository_root().join("system-tools"))
            .args(["show", plain, "--json"])
            .output()
            .unwrap();
        let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        let original = &shown["input_schema"];
        for all in [false, true] {
            let mut example = example_of(original, all);
            for property in original["properties"].as_object().unwrap().keys() {
                example
                    .as_object_mut()
                    .unwrap()
                    .entry(property.clone())
                    .or_insert(serde_json::Value::Null);
            }
            assert!(
                strict_accepts(parameters, &example),
                "{name}: {example} does not meet {parameters}"
            );
        }
    }
}

/// OpenAI's strict mode (`export --strict`) makes every property required and sends `null`
/// for an optional argument the model left out: the call runs as if it were absent.
#[test]
fn a_strict_models_null_for_a_left_out_argument_runs() {
    let context = TestContext::new();
    let output = context
        .with_examples()
        .args(["run", "hello", "--input", r#"{"name": "Ada", "age": null}"#])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\"tool_success\": true"), "{stdout}");
    // A required argument's null is still refused.
    let output = context
        .with_examples()
        .args(["run", "hello", "--input", r#"{"name": null}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("INVALID_PARAMS"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
