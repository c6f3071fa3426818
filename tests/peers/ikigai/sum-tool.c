/* An ikigai external tool in C, in ikigai's conventions: the executable is named NAME-tool,
 * `sum-tool --schema` prints its schema (per-parameter `required`, a `returns` schema), and a
 * call runs it with no argument, the JSON arguments on stdin and the JSON result on stdout.
 * A bad argument is an operation failure reported in the result (`error`, `error_code`),
 * with exit status 0, as ikigai's tools do. The test builds it with `cc`. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SCHEMA =
    "{\"name\": \"sum\", \"description\": \"Add two numbers\", "
    "\"parameters\": {"
    "\"a\": {\"type\": \"number\", \"description\": \"The first number\", \"required\": true}, "
    "\"b\": {\"type\": \"number\", \"description\": \"The second number\", \"required\": true}}, "
    "\"returns\": {\"type\": \"object\", \"properties\": {\"sum\": {\"type\": \"number\"}}}}";

/* The number after the key `"name":` in `json`, or 0 with *found cleared. */
static double number_of(const char *json, const char *name, int *found) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *at = strstr(json, key);
    *found = 0;
    if (at == NULL) {
        return 0;
    }
    at = strchr(at + strlen(key), ':');
    if (at == NULL) {
        return 0;
    }
    char *end = NULL;
    double value = strtod(at + 1, &end);
    *found = end != at + 1;
    return value;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--schema") == 0) {
        puts(SCHEMA);
        return 0;
    }
    static char input[65536];
    size_t length = fread(input, 1, sizeof input - 1, stdin);
    input[length] = '\0';
    int found_a = 0;
    int found_b = 0;
    double a = number_of(input, "a", &found_a);
    double b = number_of(input, "b", &found_b);
    if (!found_a || !found_b) {
        puts("{\"error\": \"a and b must be numbers\", \"error_code\": \"INVALID_INPUT\"}");
        return 0;
    }
    printf("{\"sum\": %.15g}\n", a + b);
    return 0;
}
