//! `toolsmith export`: the example tools in each LLM API's exact shape, and the tools a provider cannot take.

use crate::context::{TestContext, shell_tool};

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
                "type": "string",
                "description": "The error message to report"
              }
            },
            "required": [
              "should_fail"
            ]
          },
          "strict": false
        },
        {
          "type": "function",
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
                "type": "integer",
                "description": "The age of the person"
              }
            },
            "required": [
              "name"
            ]
          },
          "strict": false
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
      ]
    }
    ----- stderr -----
     WARN custom_tool_error_tool exported not strict: property `message` at the root is optional, and strict mode requires every property
     WARN custom_tool_git_info exported not strict: property `path` at the root is optional, and strict mode requires every property
     WARN custom_tool_hello exported not strict: property `age` at the root is optional, and strict mode requires every property
     WARN custom_tool_word_count exported not strict: property `lines_only` at the root is optional, and strict mode requires every property
     WARN custom_tool_word_stats exported not strict: property `top` at the root is optional, and strict mode requires every property
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
