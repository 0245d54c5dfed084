/* `llmr tokenize` and `llmr detokenize`: text to ids and back with a tokenizer.json,
 * for operators and for checks against other implementations. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs_util.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

#define STDIN_MAX (1u << 30)

static void tokenize_help(FILE *out)
{
    fprintf(out,
            "usage: llmr tokenize --tokenizer FILE|DIR [--json] [--no-special] [--add-special]\n"
            "                     [--jsonl] < text\n\n"
            "Encodes the text on standard input, taken byte for byte (a final newline is\n"
            "text too), with a Hugging Face tokenizer.json (or the one in DIR).  Prints the\n"
            "ids separated by spaces, or one JSON array with --json.\n\n"
            "  --no-special    special tokens in the text are plain text (default: recognised)\n"
            "  --add-special   add what the post-processor adds (BOS/EOS); default: nothing\n"
            "  --jsonl         each input line is a JSON string, or an object whose \"text\"\n"
            "                  is one; prints one JSON array of ids per line\n\n"
            "Invalid UTF-8 is an error that names the byte offset.\n");
}

static void detokenize_help(FILE *out)
{
    fprintf(out,
            "usage: llmr detokenize --tokenizer FILE|DIR [--skip-special] [--stream] [--jsonl] < ids\n\n"
            "Decodes ids (a JSON array, or numbers separated by spaces, commas or newlines)\n"
            "and writes the text exactly, with nothing added.\n\n"
            "  --skip-special  leave special tokens out of the text\n"
            "  --stream        decode one id at a time as a server streams (the same text, but\n"
            "                  for byte-fallback runs that are not UTF-8: docs/tokenizer.md)\n"
            "  --jsonl         each input line is a JSON array of ids (or ids separated by\n"
            "                  spaces or commas); prints one JSON string per line\n");
}

/* All of standard input, or NULL after saying why (a read error, or too large). */
static char *read_stdin(const char *cmd, size_t *len)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    char buf[65536];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            llmr_cli_error(cmd, "cannot read standard input: %s", strerror(errno));
            llmr_strbuf_free(&sb);
            return NULL;
        }
        if (n == 0)
            break;
        if (sb.len + (size_t)n > STDIN_MAX) {
            llmr_cli_error(cmd, "standard input is larger than %u bytes", STDIN_MAX);
            llmr_strbuf_free(&sb);
            return NULL;
        }
        llmr_strbuf_append(&sb, buf, (size_t)n);
    }
    *len = sb.len;
    char *text = llmr_strbuf_take(&sb);
    if (!text)
        llmr_cli_error(cmd, "out of memory reading %zu bytes of standard input", *len);
    return text;
}

/* --tokenizer takes a file or a directory holding tokenizer.json. */
static llmr_tokenizer *load(const char *cmd, const char *where)
{
    struct stat st;
    char *path = NULL;
    if (stat(where, &st) == 0 && S_ISDIR(st.st_mode))
        path = llmr_path_join(where, "tokenizer.json");
    llmr_tokenizer *tok = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load_file(path ? path : where, &tok, &err) != LLMR_OK)
        llmr_cli_error(cmd, "cannot load the tokenizer: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(path);
    return tok;
}

static void print_ids(const llmr_ids *ids, bool json)
{
    if (json)
        putchar('[');
    for (size_t i = 0; i < ids->count; i++)
        printf(i ? (json ? ",%u" : " %u") : "%u", ids->data[i]);
    puts(json ? "]" : "");
}

/* The text of one --jsonl line: a JSON string, or an object whose "text" is one.
 * NULL after saying why; otherwise *root holds it until json_decref. */
static const json_t *jsonl_text(const char *line, size_t n, size_t line_no, json_t **root)
{
    json_error_t jerr;
    /* JSON_DECODE_ANY: a bare string is a whole document here. */
    *root = json_loadb(line, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!*root) {
        llmr_cli_error("tokenize", "line %zu, column %d: not valid JSON: %s", line_no, jerr.column,
                       jerr.text);
        return NULL;
    }
    const json_t *s = json_is_object(*root) ? json_object_get(*root, "text") : *root;
    if (!json_is_string(s)) {
        llmr_cli_error("tokenize", "line %zu: expected a JSON string or an object with a string \"text\"",
                       line_no);
        json_decref(*root);
        *root = NULL;
    }
    return *root ? s : NULL;
}

static int tokenize_jsonl(const char *text, size_t len, const llmr_tokenizer *tok, unsigned flags)
{
    size_t line_no = 0;
    const char *p = text, *end = text + len;
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    int rc = LLMR_EXIT_OK;
    while (p < end && rc == LLMR_EXIT_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line_no++;
        json_t *root;
        const json_t *s = jsonl_text(p, n, line_no, &root);
        ids.count = 0;
        if (!s) {
            rc = LLMR_EXIT_FAILED;
        } else if (llmr_tokenizer_encode(tok, json_string_value(s), json_string_length(s), flags, &ids,
                                         &err) != LLMR_OK) {
            llmr_cli_error("tokenize", "line %zu: %s", line_no, llmr_strbuf_cstr(&err));
            rc = LLMR_EXIT_FAILED;
        } else {
            print_ids(&ids, true);
        }
        json_decref(root);
        p += n + (nl ? 1 : 0);
    }
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    return rc;
}

static int tokenize_run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    const char *where = NULL;
    bool json = false, jsonl = false, bad = false;
    unsigned flags = LLMR_ENCODE_PARSE_SPECIAL;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--tokenizer", &v, &bad))
            where = v;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--jsonl") == 0)
            jsonl = true;
        else if (strcmp(argv[i], "--no-special") == 0)
            flags &= ~(unsigned)LLMR_ENCODE_PARSE_SPECIAL;
        else if (strcmp(argv[i], "--add-special") == 0)
            flags |= LLMR_ENCODE_ADD_SPECIAL;
        else {
            llmr_cli_error("tokenize", "unexpected argument \"%s\"; see llmr tokenize --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && !where) {
        llmr_cli_error("tokenize", "--tokenizer FILE is required");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    llmr_tokenizer *tok = load("tokenize", where);
    if (!tok)
        return LLMR_EXIT_FAILED;
    size_t len;
    char *text = read_stdin("tokenize", &len);
    int rc = LLMR_EXIT_OK;
    if (!text) {
        rc = LLMR_EXIT_FAILED;
    } else if (jsonl) {
        rc = tokenize_jsonl(text, len, tok, flags);
    } else {
        llmr_ids ids = LLMR_IDS_INIT;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_tokenizer_encode(tok, text, len, flags, &ids, &err) != LLMR_OK) {
            llmr_cli_error("tokenize", "%s", llmr_strbuf_cstr(&err));
            rc = LLMR_EXIT_FAILED;
        } else {
            print_ids(&ids, json);
        }
        llmr_ids_free(&ids);
        llmr_strbuf_free(&err);
    }
    free(text);
    llmr_tokenizer_free(tok);
    return rc;
}

/* Ids as a JSON array or as numbers separated by whitespace or commas. */
static bool parse_ids(const char *text, size_t len, llmr_ids *ids, llmr_strbuf *err)
{
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", text[i]))
        i++;
    bool bracket = i < len && text[i] == '[';
    if (bracket)
        i++;
    bool closed = false;
    while (i < len) {
        char c = text[i];
        if (strchr(" \t\r\n,", c)) {
            i++;
            continue;
        }
        if (c == ']' && bracket && !closed) {
            closed = true;
            i++;
            continue;
        }
        if (c < '0' || c > '9' || closed) {
            llmr_strbuf_printf(err, "byte %zu: expected an id (a non-negative integer)", i);
            return false;
        }
        uint64_t v = 0;
        while (i < len && text[i] >= '0' && text[i] <= '9') {
            v = v * 10 + (uint64_t)(text[i++] - '0');
            if (v > UINT32_MAX) {
                llmr_strbuf_printf(err, "byte %zu: id larger than %u", i, UINT32_MAX);
                return false;
            }
        }
        if (!llmr_ids_push(ids, (uint32_t)v)) {
            llmr_strbuf_puts(err, "out of memory");
            return false;
        }
    }
    if (bracket && !closed) {
        llmr_strbuf_puts(err, "the JSON array is not closed");
        return false;
    }
    return true;
}

/* Decodes ids one at a time, as a stream, appending the text to out. */
static llmr_status decode_streamed(const llmr_tokenizer *tok, unsigned flags, const llmr_ids *ids,
                                   llmr_strbuf *out, llmr_strbuf *err)
{
    llmr_detokenizer d;
    llmr_status st = llmr_detokenizer_init(&d, tok, flags, NULL, 0);
    for (size_t i = 0; st == LLMR_OK && i < ids->count; i++)
        st = llmr_detokenizer_push(&d, ids->data[i], out, err);
    if (st == LLMR_OK)
        st = llmr_detokenizer_finish(&d, out, err);
    llmr_detokenizer_free(&d);
    return st;
}

static int detokenize_jsonl(const char *text, size_t len, const llmr_tokenizer *tok, unsigned flags,
                            bool stream)
{
    const char *p = text, *end = text + len;
    size_t line_no = 0;
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    int rc = LLMR_EXIT_OK;
    while (p < end && rc == LLMR_EXIT_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line_no++;
        ids.count = 0;
        llmr_strbuf_reset(&out);
        llmr_status st = parse_ids(p, n, &ids, &err)
                             ? (stream ? decode_streamed(tok, flags, &ids, &out, &err)
                                       : llmr_tokenizer_decode(tok, ids.data, ids.count, flags, &out, NULL, &err))
                             : LLMR_INVALID_ARGUMENT;
        json_t *s = st == LLMR_OK ? json_stringn(llmr_strbuf_cstr(&out), out.len) : NULL;
        char *dumped = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        if (!dumped) {
            llmr_cli_error("detokenize", "line %zu: %s", line_no,
                           err.len ? llmr_strbuf_cstr(&err) : "the text is not valid UTF-8");
            rc = LLMR_EXIT_FAILED;
        } else {
            puts(dumped);
        }
        free(dumped);
        json_decref(s);
        p += n + (nl ? 1 : 0);
    }
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
    return rc;
}

static int detokenize_run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    const char *where = NULL;
    bool stream = false, jsonl = false, bad = false;
    unsigned flags = 0;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--tokenizer", &v, &bad))
            where = v;
        else if (strcmp(argv[i], "--skip-special") == 0)
            flags |= LLMR_DECODE_SKIP_SPECIAL;
        else if (strcmp(argv[i], "--stream") == 0)
            stream = true;
        else if (strcmp(argv[i], "--jsonl") == 0)
            jsonl = true;
        else {
            llmr_cli_error("detokenize", "unexpected argument \"%s\"; see llmr detokenize --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && !where) {
        llmr_cli_error("detokenize", "--tokenizer FILE is required");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    size_t len;
    char *text = read_stdin("detokenize", &len);
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    llmr_tokenizer *tok = NULL;
    int rc = LLMR_EXIT_FAILED;
    if (!text)
        goto done;
    if (jsonl) {
        if ((tok = load("detokenize", where)))
            rc = detokenize_jsonl(text, len, tok, flags, stream);
        goto done;
    }
    if (!parse_ids(text, len, &ids, &err)) {
        llmr_cli_error("detokenize", "%s", llmr_strbuf_cstr(&err));
        rc = LLMR_EXIT_USAGE;
        goto done;
    }
    if (!(tok = load("detokenize", where)))
        goto done;
    size_t unknown = 0;
    for (size_t i = 0; i < ids.count; i++)
        if (!llmr_tokenizer_id_to_token(tok, ids.data[i], &len))
            unknown++;
    if (stream) {
        if (decode_streamed(tok, flags, &ids, &out, &err) == LLMR_OK)
            fwrite(llmr_strbuf_cstr(&out), 1, out.len, stdout);
    } else if (llmr_tokenizer_decode(tok, ids.data, ids.count, flags, &out, NULL, &err) == LLMR_OK) {
        fwrite(llmr_strbuf_cstr(&out), 1, out.len, stdout);
    }
    if (err.len) {
        llmr_cli_error("detokenize", "%s", llmr_strbuf_cstr(&err));
        goto done;
    }
    if (unknown)
        llmr_cli_error("detokenize", "warning: %zu ids are not in the vocabulary and were skipped", unknown);
    rc = LLMR_EXIT_OK;
done:
    free(text);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
    llmr_tokenizer_free(tok);
    return rc;
}

const llmr_command llmr_cmd_tokenize = {"tokenize", "text on stdin to token ids", tokenize_run,
                                        tokenize_help};
const llmr_command llmr_cmd_detokenize = {"detokenize", "token ids on stdin to text",
                                          detokenize_run, detokenize_help};
