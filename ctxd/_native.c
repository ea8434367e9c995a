/*
 * ctxd._native: one pass over a chunk of session lines (see ctxd/store/native.py).
 *
 * For each line of a chunk of complete JSONL lines, scan_chunk validates the JSON strictly (a subset of
 * what msgspec accepts: any doubt makes the whole chunk "not plain" and the caller takes the Python path,
 * which reports what is wrong), finds its offset and length, computes pi's token estimate of a "message"
 * entry, and writes a reduced copy of the line that holds only the members the index head reads (so the
 * head decoder skips no message bodies). Lines here are never decoded into Python objects.
 *
 * What "plain" requires of every line: a JSON object with nothing after it; valid UTF-8; no raw control
 * character in a string; escapes from the JSON set, surrogate escapes only as valid pairs; numbers of the
 * JSON grammar, at most 40 characters, exponents of at most 2 digits; nesting no deeper than max_depth;
 * keys of the line's object and of its "message" object written without escapes.
 *
 * The estimate equals ctxd.context.line_estimate.estimate_line on the same line, or is -1 when this pass
 * does not know it (then the caller estimates as before): a float or a long integer or a repeated key in
 * a tool call's arguments, a repeated field the estimate reads, an escaped role or type, an unexpected
 * shape.
 *
 * The tool calls a "message" entry records (ctxd.context.rules.message_calls: an assistant's toolCall
 * blocks, a tool result's nestedCalls) are noted as where their JSON lies in the line (each toolCall block,
 * or a tool result's nestedCalls value), so that a compaction plan decodes those few bytes and not the
 * line. Each line gets a flag: 1 no calls, 2 calls (listed), 0 not known (the caller reads the line).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define IMAGE_CHARS 4800
#define MAX_ARG_KEYS 64

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    int depth;
    int max_depth;
} Cursor;

/* What a string scan found: its length in UTF-16 code units, the length JSON.stringify writes for it
 * (quotes included), and whether it had an escape. */
typedef struct {
    int64_t u16;
    int64_t js;
    int escaped;
} StrInfo;

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

static inline int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_u4(const unsigned char *p, const unsigned char *end) {
    if (end - p < 4) return -1;
    int a = hexval(p[0]), b = hexval(p[1]), d = hexval(p[2]), e = hexval(p[3]);
    if ((a | b | d | e) < 0) return -1;
    return (a << 12) | (b << 8) | (d << 4) | e;
}

/* JSON.stringify's length for one UTF-16 code unit below 0x80 written as itself. */
static inline int js_ascii(int ch) {
    if (ch == '"' || ch == '\\') return 2;
    if (ch < 0x20) return (ch == 8 || ch == 9 || ch == 10 || ch == 12 || ch == 13) ? 2 : 6;
    return 1;
}

/* A multi-byte UTF-8 sequence at p (p[0] >= 0x80): its length in bytes, or 0 if invalid (as Python's
 * strict decoder: no overlong forms, no surrogates, nothing above U+10FFFF). */
static inline int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char b0 = p[0];
    Py_ssize_t left = end - p;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        if (left < 2 || (p[1] & 0xC0) != 0x80) return 0;
        return 2;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (b0 == 0xE0 && p[1] < 0xA0) return 0;
        if (b0 == 0xED && p[1] > 0x9F) return 0;
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (b0 == 0xF0 && p[1] < 0x90) return 0;
        if (b0 == 0xF4 && p[1] > 0x8F) return 0;
        return 4;
    }
    return 0;
}

/* A string from its opening quote; the cursor ends after the closing quote. 0: not plain. */
static int scan_string(Cursor *c, StrInfo *s) {
    const unsigned char *p = c->p + 1;
    const unsigned char *end = c->end;
    int64_t u16 = 0, js = 2;
    int escaped = 0;
    for (;;) {
#ifdef __SSE2__
        const __m128i quote = _mm_set1_epi8('"');
        const __m128i slash = _mm_set1_epi8('\\');
        const __m128i space = _mm_set1_epi8(0x20);
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            /* signed compare: bytes >= 0x80 are negative, so below 0x20 too */
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                       _mm_cmplt_epi8(v, space));
            int mask = _mm_movemask_epi8(hit);
            if (mask == 0) {
                p += 16;
                u16 += 16;
                js += 16;
                continue;
            }
            int k = __builtin_ctz((unsigned)mask);
            p += k;
            u16 += k;
            js += k;
            break;
        }
#endif
        if (p >= end) return 0;
        unsigned char ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            s->u16 = u16;
            s->js = js;
            s->escaped = escaped;
            return 1;
        }
        if (ch == '\\') {
            escaped = 1;
            if (end - p < 2) return 0;
            unsigned char e = p[1];
            switch (e) {
            case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't':
                u16 += 1;
                js += 2;
                p += 2;
                break;
            case '/':
                u16 += 1;
                js += 1;
                p += 2;
                break;
            case 'u': {
                int cp = read_u4(p + 2, end);
                if (cp < 0) return 0;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* only a valid pair: a lone surrogate is left to the Python path */
                    if (end - p < 12 || p[6] != '\\' || p[7] != 'u') return 0;
                    int lo = read_u4(p + 8, end);
                    if (lo < 0xDC00 || lo > 0xDFFF) return 0;
                    u16 += 2;
                    js += 2;
                    p += 12;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return 0;
                } else {
                    u16 += 1;
                    js += cp < 0x80 ? js_ascii(cp) : 1;
                    p += 6;
                }
                break;
            }
            default:
                return 0;
            }
            continue;
        }
        if (ch < 0x20) return 0; /* a raw control character: not JSON */
        if (ch < 0x80) {
            u16 += 1;
            js += 1;
            p += 1;
            continue;
        }
        int n = utf8_seq(p, end);
        if (n == 0) return 0;
        u16 += n == 4 ? 2 : 1;
        js += n == 4 ? 2 : 1;
        p += n;
    }
}

/* A number: its grammar, and whether it is a plain integer (no fraction, no exponent).
 * Returns its length, 0 if not plain. */
static int scan_number(Cursor *c, int *integer) {
    const unsigned char *p = c->p, *end = c->end, *start = c->p;
    *integer = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return 0;
    }
    if (p < end && *p == '.') {
        *integer = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *integer = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const unsigned char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        /* msgspec refuses a number out of a double's range ("Number out of range"): with at most two
         * exponent digits and 40 characters, none is (at most about 1e139; the smallest become 0.0). */
        if (p == digits || p - digits > 2) return 0;
    }
    if (p - start > 40) return 0;
    c->p = p;
    return (int)(p - start);
}

static int scan_literal(Cursor *c) {
    Py_ssize_t left = c->end - c->p;
    if (left >= 4 && memcmp(c->p, "true", 4) == 0) { c->p += 4; return 4; }
    if (left >= 5 && memcmp(c->p, "false", 5) == 0) { c->p += 5; return 5; }
    if (left >= 4 && memcmp(c->p, "null", 4) == 0) { c->p += 4; return 4; }
    return 0;
}

/* At an opening bracket: 0 not plain (nested too deep), 1 an empty container (consumed through
 * `close`), 2 items follow (the cursor at the first). */
static inline int enter(Cursor *c, unsigned char close) {
    if (++c->depth > c->max_depth) return 0;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        c->depth--;
        return 1;
    }
    return 2;
}

/* After a key: the colon and the spaces around it. 0: not plain. */
static inline int colon(Cursor *c) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return 0;
    c->p++;
    skip_ws(c);
    return 1;
}

/* After a member or an element: 1 when a comma follows (consumed: more to come), 2 when `close` follows
 * (consumed: the container ends, one level up), 0 when neither (not plain). */
static inline int after_item(Cursor *c, unsigned char close) {
    skip_ws(c);
    if (c->p >= c->end) return 0;
    if (*c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (*c->p == close) {
        c->p++;
        c->depth--;
        return 2;
    }
    return 0;
}

/* A key written without escapes, and the colon after it (*k, *kl: its text). 0: not plain. */
static int plain_key(Cursor *c, const unsigned char **k, Py_ssize_t *kl) {
    StrInfo s;
    const unsigned char *start = c->p;
    if (c->p >= c->end || *c->p != '"' || !scan_string(c, &s) || s.escaped) return 0;
    *k = start + 1;
    *kl = (c->p - 1) - *k;
    return colon(c);
}

/* Any value, validated and skipped. 0: not plain. */
static int skip_value(Cursor *c);

static int skip_container(Cursor *c, unsigned char close) {
    int opened = enter(c, close);
    if (opened < 2) return opened;
    for (;;) {
        if (close == '}') {
            StrInfo s;
            if (c->p >= c->end || *c->p != '"' || !scan_string(c, &s)) return 0;
            if (!colon(c)) return 0;
        }
        if (!skip_value(c)) return 0;
        int next = after_item(c, close);
        if (next == 1) continue;
        if (next == 2) return 1;
        return 0;
    }
}

static int skip_value(Cursor *c) {
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') {
        StrInfo s;
        return scan_string(c, &s);
    }
    if (ch == '{') return skip_container(c, '}');
    if (ch == '[') return skip_container(c, ']');
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int integer;
        return scan_number(c, &integer) > 0;
    }
    return scan_literal(c) > 0;
}

/* A value, validated, and the length JSON.stringify writes for it into *len (-1: not known here).
 * 0: not plain. */
static int measure_value(Cursor *c, int64_t *len) {
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') {
        StrInfo s;
        if (!scan_string(c, &s)) return 0;
        *len = s.js;
        return 1;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int integer;
        const unsigned char *start = c->p;
        int n = scan_number(c, &integer);
        if (n == 0) return 0;
        if (!integer || n > 15) *len = -1; /* JavaScript's own number printing: left to Python */
        else if (n == 2 && start[0] == '-' && start[1] == '0') *len = 1;
        else *len = n;
        return 1;
    }
    if (ch == '[' || ch == '{') {
        int object = ch == '{';
        unsigned char close = object ? '}' : ']';
        const unsigned char *keys[MAX_ARG_KEYS];
        Py_ssize_t key_lens[MAX_ARG_KEYS];
        int nkeys = 0;
        int64_t total = 2, count = 0;
        int known = 1;
        int opened = enter(c, close);
        if (opened == 0) return 0;
        if (opened == 1) {
            *len = 2;
            return 1;
        }
        for (;;) {
            if (object) {
                StrInfo s;
                const unsigned char *kstart = c->p;
                if (c->p >= c->end || *c->p != '"' || !scan_string(c, &s)) return 0;
                /* a repeated key: JSON.parse keeps one of them; left to Python */
                if (s.escaped || nkeys == MAX_ARG_KEYS) {
                    known = 0;
                } else {
                    Py_ssize_t kl = c->p - kstart;
                    for (int k = 0; k < nkeys; k++)
                        if (key_lens[k] == kl && memcmp(keys[k], kstart, (size_t)kl) == 0) known = 0;
                    keys[nkeys] = kstart;
                    key_lens[nkeys++] = kl;
                }
                total += s.js + 1;
                if (!colon(c)) return 0;
            }
            int64_t one;
            if (!measure_value(c, &one)) return 0;
            if (one < 0) known = 0;
            else total += one;
            count++;
            int next = after_item(c, close);
            if (next == 1) continue;
            if (next == 2) break;
            return 0;
        }
        *len = known ? total + count - 1 : -1;
        return 1;
    }
    int n = scan_literal(c);
    *len = n;
    return n > 0;
}

/* ---- the line's object: which members the index head reads, and the estimate ---- */

#define KEY_IS(k, n, lit) ((n) == (Py_ssize_t)(sizeof(lit) - 1) && memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* Whether a key of the line's object is one of LineHead's fields (ctxd/formats/codec.py). */
static int head_key(const unsigned char *k, Py_ssize_t n) {
    switch (n) {
    case 2: return KEY_IS(k, n, "id");
    case 3: return KEY_IS(k, n, "cwd");
    case 4: return KEY_IS(k, n, "type") || KEY_IS(k, n, "name");
    case 5: return KEY_IS(k, n, "label");
    case 6: return KEY_IS(k, n, "fromId");
    case 7: return KEY_IS(k, n, "message") || KEY_IS(k, n, "modelId") || KEY_IS(k, n, "version");
    case 8: return KEY_IS(k, n, "parentId") || KEY_IS(k, n, "provider") ||
                   KEY_IS(k, n, "targetId");
    case 9: return KEY_IS(k, n, "timestamp");
    case 10: return KEY_IS(k, n, "customType");
    case 12: return KEY_IS(k, n, "tokensBefore");
    case 13: return KEY_IS(k, n, "thinkingLevel");
    case 16: return KEY_IS(k, n, "firstKeptEntryId");
    case 19: return KEY_IS(k, n, "firstKeptEntryIndex");
    default: return 0;
    }
}

/* Whether a key of the "message" object is one of MessageHead's fields. */
static int message_key(const unsigned char *k, Py_ssize_t n) {
    switch (n) {
    case 4: return KEY_IS(k, n, "role");
    case 5: return KEY_IS(k, n, "usage") || KEY_IS(k, n, "model");
    case 8: return KEY_IS(k, n, "provider");
    case 10: return KEY_IS(k, n, "stopReason") || KEY_IS(k, n, "toolCallId");
    case 12: return KEY_IS(k, n, "errorMessage");
    default: return 0;
    }
}

typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
} Out;

static int out_put(Out *o, const void *src, Py_ssize_t n) {
    if (o->len + n > o->cap) {
        Py_ssize_t cap = o->cap * 2 + n + 1024;
        unsigned char *grown = realloc(o->data, (size_t)cap);
        if (!grown) return 0;
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, src, (size_t)n);
    o->len += n;
    return 1;
}

/* Append one member's bytes [start, end) to out, after a comma unless it is the first. 0: no memory. */
static int copy_member(Out *out, int *first, const unsigned char *start, const unsigned char *end) {
    if (!*first && !out_put(out, ",", 1)) return 0;
    *first = 0;
    return out_put(out, start, end - start);
}

enum { ROLE_NONE, ROLE_TEXT, ROLE_TOOL_RESULT, ROLE_ASSISTANT, ROLE_OTHER };

#define MAX_LINE_CALLS 64

/* Where a toolCall block lies, as an offset from the line's start. */
typedef struct {
    int64_t off, len;
} CallSpan;

/* What the content of a message counts, for each kind of role; known: its shape is one the estimate knows.
 * Also the tool calls it records (see the top): its toolCall blocks, and the message's nestedCalls. */
typedef struct {
    int64_t text_chars;      /* user, toolResult, custom */
    int64_t assistant_chars; /* assistant */
    int assistant_known;
    int known;
    const unsigned char *line; /* the line's first byte */
    int ncalls;
    int calls_known; /* 0: more toolCall blocks than MAX_LINE_CALLS */
    int64_t nested_off, nested_len;
    CallSpan calls[MAX_LINE_CALLS];
} Content;

static void content_init(Content *ct, const unsigned char *line) {
    ct->text_chars = ct->assistant_chars = 0;
    ct->assistant_known = ct->known = ct->calls_known = 1;
    ct->line = line;
    ct->ncalls = 0;
    ct->nested_off = ct->nested_len = -1;
}

/* A content block (an object). Fields of interest: type, text, thinking, name, arguments. */
static int scan_block(Cursor *c, Content *ct) {
    enum { K_TYPE = 1, K_TEXT = 2, K_THINKING = 4, K_NAME = 8, K_ARGS = 16 };
    int seen = 0;
    int kind = 0; /* 1 text, 2 image, 3 thinking, 4 toolCall */
    int64_t text = -1, thinking = -1, name = -1, args = -2; /* -1: not a string; args -2: absent */
    CallSpan span = {c->p - ct->line, 0};
    int opened = enter(c, '}');
    if (opened < 2) return opened;
    for (;;) {
        StrInfo s;
        const unsigned char *kstart = c->p + 1;
        if (c->p >= c->end || *c->p != '"' || !scan_string(c, &s)) return 0;
        Py_ssize_t kl = (c->p - 1) - kstart;
        int which = 0;
        if (s.escaped) {
            ct->known = 0; /* an escaped key may name a field: left to Python */
        } else if (KEY_IS(kstart, kl, "type")) {
            which = K_TYPE;
        } else if (KEY_IS(kstart, kl, "text")) {
            which = K_TEXT;
        } else if (KEY_IS(kstart, kl, "thinking")) {
            which = K_THINKING;
        } else if (KEY_IS(kstart, kl, "name")) {
            which = K_NAME;
        } else if (KEY_IS(kstart, kl, "arguments")) {
            which = K_ARGS;
        }
        if (which & seen) ct->known = 0;
        seen |= which;
        if (!colon(c)) return 0;
        if (which == K_ARGS) {
            int64_t len;
            if (!measure_value(c, &len)) return 0;
            args = len; /* -1 when not known */
        } else if (which && c->p < c->end && *c->p == '"') {
            const unsigned char *vstart = c->p + 1;
            if (!scan_string(c, &s)) return 0;
            Py_ssize_t vl = (c->p - 1) - vstart;
            if (which == K_TYPE) {
                if (s.escaped) ct->known = 0;
                else if (KEY_IS(vstart, vl, "text")) kind = 1;
                else if (KEY_IS(vstart, vl, "image")) kind = 2;
                else if (KEY_IS(vstart, vl, "thinking")) kind = 3;
                else if (KEY_IS(vstart, vl, "toolCall")) kind = 4;
            } else if (which == K_TEXT) {
                text = s.u16;
            } else if (which == K_THINKING) {
                thinking = s.u16;
            } else if (which == K_NAME) {
                name = s.u16;
            }
        } else {
            if (!skip_value(c)) return 0;
        }
        int next = after_item(c, '}');
        if (next == 1) continue;
        if (next == 2) break;
        return 0;
    }
    if (kind == 4) {
        span.len = (c->p - ct->line) - span.off;
        if (ct->ncalls < MAX_LINE_CALLS) ct->calls[ct->ncalls++] = span;
        else ct->calls_known = 0;
    }
    if (kind == 1) {
        if (text >= 0) {
            ct->text_chars += text;
            ct->assistant_chars += text;
        }
    } else if (kind == 2) {
        ct->text_chars += IMAGE_CHARS;
    } else if (kind == 3) {
        if (thinking >= 0) ct->assistant_chars += thinking;
    } else if (kind == 4) {
        if (name >= 0) ct->assistant_chars += name;
        if (args == -2) ct->assistant_chars += 2;
        else if (args < 0) ct->assistant_known = 0;
        else ct->assistant_chars += args;
    }
    return 1;
}

/* A message's content: a string, null, or a list of blocks (objects). */
static int scan_content(Cursor *c, Content *ct) {
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') {
        StrInfo s;
        if (!scan_string(c, &s)) return 0;
        ct->text_chars += s.u16;
        return 1;
    }
    if (ch == 'n') return scan_literal(c) > 0;
    if (ch != '[') {
        ct->known = 0; /* another type: the typed decode refuses it */
        return skip_value(c);
    }
    int opened = enter(c, ']');
    if (opened < 2) return opened;
    for (;;) {
        if (c->p < c->end && *c->p == '{') {
            if (!scan_block(c, ct)) return 0;
        } else {
            ct->known = 0; /* a block that is not an object */
            if (!skip_value(c)) return 0;
        }
        int next = after_item(c, ']');
        if (next == 1) continue;
        if (next == 2) return 1;
        return 0;
    }
}

/* The "message" object: copies MessageHead's members to out, and counts the content. */
static int scan_message(Cursor *c, Out *out, int *role, Content *ct) {
    int seen_role = 0, seen_content = 0, first = 1;
    int opened = enter(c, '}');
    if (opened == 0) return 0;
    if (!out_put(out, opened == 1 ? "{}" : "{", opened == 1 ? 2 : 1)) return -1;
    if (opened == 1) return 1;
    for (;;) {
        StrInfo s;
        const unsigned char *mstart = c->p, *k;
        Py_ssize_t kl;
        if (!plain_key(c, &k, &kl)) return 0;
        if (KEY_IS(k, kl, "content")) {
            if (seen_content) ct->known = 0;
            seen_content = 1;
            if (!scan_content(c, ct)) return 0;
        } else if (KEY_IS(k, kl, "role")) {
            if (seen_role) ct->known = 0;
            seen_role = 1;
            const unsigned char *vstart = c->p + 1;
            if (c->p < c->end && *c->p == '"') {
                if (!scan_string(c, &s)) return 0;
                Py_ssize_t vl = (c->p - 1) - vstart;
                if (s.escaped) *role = ROLE_OTHER, ct->known = 0;
                else if (KEY_IS(vstart, vl, "user") || KEY_IS(vstart, vl, "custom")) *role = ROLE_TEXT;
                else if (KEY_IS(vstart, vl, "toolResult")) *role = ROLE_TOOL_RESULT;
                else if (KEY_IS(vstart, vl, "assistant")) *role = ROLE_ASSISTANT;
                else *role = ROLE_OTHER;
            } else {
                if (!skip_value(c)) return 0;
                *role = ROLE_OTHER;
            }
        } else if (KEY_IS(k, kl, "nestedCalls")) {
            const unsigned char *value = c->p;
            if (ct->nested_off >= 0) ct->known = 0; /* repeated: the decoder keeps the last */
            if (!skip_value(c)) return 0;
            ct->nested_off = value - ct->line;
            ct->nested_len = c->p - value;
        } else {
            if (!skip_value(c)) return 0;
        }
        if (message_key(k, kl) && !copy_member(out, &first, mstart, c->p)) return -1;
        int next = after_item(c, '}');
        if (next == 1) continue;
        if (next == 2) return out_put(out, "}", 1) ? 1 : -1;
        return 0;
    }
}

/* One line [c->p, c->end): 1 plain (reduced copy appended to out, *estimate and *calls set: 0 not known,
 * 1 none, 2 the toolCall blocks in ct, 3 the nestedCalls in ct), 0 not plain, -1 no memory. */
static int scan_line(Cursor *c, Out *out, int64_t *estimate, int *calls, Content *ct) {
    int first = 1, type_message = 0, type_seen = 0, message_seen = 0, message_object = 0;
    int role = ROLE_NONE;
    content_init(ct, c->p);
    *estimate = -1;
    *calls = 0;
    skip_ws(c);
    if (c->p >= c->end || *c->p != '{') return 0;
    c->depth = 1;
    c->p++;
    if (!out_put(out, "{", 1)) return -1;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            StrInfo s;
            const unsigned char *mstart = c->p, *k;
            Py_ssize_t kl;
            if (!plain_key(c, &k, &kl)) return 0;
            int wanted = head_key(k, kl);
            if (KEY_IS(k, kl, "message")) {
                if (message_seen) ct->known = 0;
                message_seen = 1;
                if (!first && !out_put(out, ",", 1)) return -1;
                first = 0;
                if (c->p < c->end && *c->p == '{') {
                    message_object = 1;
                    if (!out_put(out, mstart, c->p - mstart)) return -1;
                    int r = scan_message(c, out, &role, ct);
                    if (r <= 0) return r;
                } else {
                    const unsigned char *vstart = c->p;
                    if (!skip_value(c)) return 0;
                    message_object = 0;
                    (void)vstart;
                    if (!out_put(out, mstart, c->p - mstart)) return -1;
                }
                wanted = 0;
            } else if (KEY_IS(k, kl, "type")) {
                if (type_seen) ct->known = 0;
                type_seen = 1;
                const unsigned char *vstart = c->p + 1;
                if (c->p < c->end && *c->p == '"') {
                    if (!scan_string(c, &s)) return 0;
                    type_message = !s.escaped && KEY_IS(vstart, (c->p - 1) - vstart, "message");
                    if (s.escaped) ct->known = 0;
                } else {
                    if (!skip_value(c)) return 0;
                    type_message = 0;
                }
            } else {
                if (!skip_value(c)) return 0;
            }
            if (wanted && !copy_member(out, &first, mstart, c->p)) return -1;
            int next = after_item(c, '}');
            if (next == 1) continue;
            if (next == 2) break;
            return 0;
        }
    }
    skip_ws(c);
    if (c->p != c->end) return 0; /* something after the object: the Python path reports or recovers it */
    if (!out_put(out, "}\n", 2)) return -1;
    if (type_message && message_object && ct->known) {
        if (role == ROLE_TEXT || role == ROLE_TOOL_RESULT) *estimate = (ct->text_chars + 3) / 4;
        else if (role == ROLE_ASSISTANT && ct->assistant_known) *estimate = (ct->assistant_chars + 3) / 4;
        if (ct->calls_known) {
            if (role == ROLE_ASSISTANT) *calls = ct->ncalls ? 2 : 1;
            else if (role == ROLE_TOOL_RESULT) *calls = ct->nested_off >= 0 ? 3 : 1;
            else *calls = 1;
        }
    }
    return 1;
}

static PyObject *bytes_of(const void *data, Py_ssize_t n) {
    return PyBytes_FromStringAndSize((const char *)data, n);
}


/* What one chunk's scan produced. */
typedef struct {
    Out lines, offsets, lengths, est_lines, est_values, numbers, call_flags, calls;
} Outs;

static void outs_reset(Outs *o) {
    o->lines.len = o->offsets.len = o->lengths.len = o->est_lines.len = o->est_values.len = o->numbers.len = 0;
    o->call_flags.len = o->calls.len = 0;
}

static void out_free(Out *o) {
    free(o->data);
    o->data = NULL;
    o->cap = o->len = 0;
}

static void outs_free(Outs *o) {
    out_free(&o->lines);
    out_free(&o->offsets);
    out_free(&o->lengths);
    out_free(&o->est_lines);
    out_free(&o->est_values);
    out_free(&o->numbers);
    out_free(&o->call_flags);
    out_free(&o->calls);
}

/* A line's tool calls (see the top): its flag, and for each call four int64s: the line (0-based in the chunk),
 * the kind (1 a toolCall block, 2 the nestedCalls value of a tool result), its offset in the line and its
 * length. 0: no memory. */
static int put_calls(Outs *o, int64_t line, int calls, const Content *ct) {
    unsigned char f = (unsigned char)(calls > 2 ? 2 : calls);
    if (!out_put(&o->call_flags, &f, 1)) return 0;
    if (calls == 3) {
        int64_t rec[4] = {line, 2, ct->nested_off, ct->nested_len};
        return out_put(&o->calls, rec, sizeof rec);
    }
    if (calls != 2) return 1;
    for (int k = 0; k < ct->ncalls; k++) {
        const CallSpan *cs = &ct->calls[k];
        int64_t rec[4] = {line, 1, cs->off, cs->len};
        if (!out_put(&o->calls, rec, sizeof rec)) return 0;
    }
    return 1;
}

/* Scan the complete lines of data[:end] into o (no Python object is touched: callable without the GIL).
 * 1: every line plain; 0: declined; -1: out of memory. */
static int scan_lines(const unsigned char *data, Py_ssize_t end, int64_t base, int max_depth, int64_t first_line,
                      Outs *o) {
    Py_ssize_t pos = 0;
    int64_t line = 0;
    outs_reset(o);
    while (pos < end) {
        const unsigned char *nl = memchr(data + pos, '\n', (size_t)(end - pos));
        if (!nl) return 0; /* complete lines only */
        Py_ssize_t stop = nl - data;
        Cursor c = {data + pos, nl, 0, max_depth};
        int64_t estimate;
        int calls;
        Content ct;
        int r = scan_line(&c, &o->lines, &estimate, &calls, &ct);
        if (r <= 0) return r;
        if (!put_calls(o, line, calls, &ct)) return -1;
        int64_t off = base + pos, len = stop - pos, number = first_line + line;
        if (!out_put(&o->offsets, &off, 8) || !out_put(&o->lengths, &len, 8) || !out_put(&o->numbers, &number, 8))
            return -1;
        if (estimate >= 0) {
            if (!out_put(&o->est_lines, &line, 8) || !out_put(&o->est_values, &estimate, 8)) return -1;
        }
        line++;
        pos = stop + 1;
    }
    return 1;
}

static PyObject *outs_tuple(Outs *o) {
    return Py_BuildValue("(NNNNNNNN)", bytes_of(o->lines.data, o->lines.len),
                         bytes_of(o->offsets.data, o->offsets.len), bytes_of(o->lengths.data, o->lengths.len),
                         bytes_of(o->est_lines.data, o->est_lines.len), bytes_of(o->est_values.data, o->est_values.len),
                         bytes_of(o->numbers.data, o->numbers.len), bytes_of(o->call_flags.data, o->call_flags.len),
                         bytes_of(o->calls.data, o->calls.len));
}

/* Kept between calls, one set per thread: a call releases the GIL while it scans. */
static _Thread_local Outs thread_outs;

static void outs_trim(Outs *o) {
    Out *all[] = {&o->lines, &o->offsets, &o->lengths, &o->est_lines, &o->est_values, &o->numbers,
                  &o->call_flags, &o->calls};
    for (int k = 0; k < 8; k++)
        if (all[k]->cap > (8 << 20)) out_free(all[k]);
}

PyDoc_STRVAR(scan_chunk_doc,
"scan_chunk(buffer, end, base, max_depth, first_line) -> (reduced, offsets, lengths, est_lines, est_values,\n"
"numbers, call_flags, calls) or None\n\n"
"Index the complete lines of buffer[:end] (each ending in a newline): None when any line is not plain\n"
"(the caller takes the Python path); else the reduced lines (one per line, newline-separated), each\n"
"line's offset (base + its start) and length without the newline, as int64 arrays in bytes, and the\n"
"lines (0-based in the chunk) whose estimate is known with their estimates, and each line's number\n"
"(first_line + its position), as int64 arrays in bytes; each line's calls flag (a byte: 0 not known, 1 none,\n"
"2 listed) and the calls listed, four int64s each (line, kind: 1 a toolCall block, 2 a tool result's\n"
"nestedCalls value, its offset in the line and its length). The GIL is released while it scans: the buffer\n"
"must not change until it returns.");

static PyObject *scan_chunk(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t end;
    long long base, first_line;
    int max_depth;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnLiL", &obj, &end, &base, &max_depth, &first_line)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (end < 0 || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "end is outside the buffer");
        return NULL;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_lines((const unsigned char *)view.buf, end, base, max_depth, first_line, &thread_outs);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result;
    if (status < 0) result = PyErr_NoMemory();
    else if (status == 0) result = Py_NewRef(Py_None);
    else result = outs_tuple(&thread_outs);
    outs_trim(&thread_outs);
    return result;
}

#ifndef _WIN32
/* ---- Prefetch: reading and scanning ahead on a native thread ----
 *
 * A big file's lines are read and scanned on a thread of its own, a few chunks ahead of the Python code
 * that indexes them, so that the two run at once on two cores. The thread never touches a Python object.
 * The chunks come out exactly as ctxd.store.scan.scan cuts them: complete lines, at most `chunk` bytes
 * unless a line is longer (then the buffer grows, up to max_line; a longer line is skipped and reported),
 * and a last line without its newline left unconsumed. */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#define NSLOTS 4
enum { EV_CHUNK = 1, EV_TOO_LONG = 2, EV_END = 3, EV_ERROR = 4 };
enum { SLOT_FREE = 0, SLOT_READY = 1, SLOT_TAKEN = 2 };

typedef struct {
    unsigned char *buf;
    Py_ssize_t cap, end;
    int64_t base;
    int kind, status, err, state;
    Outs outs;
} Slot;

typedef struct {
    PyObject_HEAD
    int fd, max_depth, started, stop, joined, ended;
    int64_t start, first_line;
    Py_ssize_t chunk, max_line;
    Slot slots[NSLOTS];
    int next_read, taken;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
} Prefetch;

static Slot *free_slot(Prefetch *pf, int k) {
    Slot *s = &pf->slots[k];
    pthread_mutex_lock(&pf->mu);
    while (s->state != SLOT_FREE && !pf->stop) pthread_cond_wait(&pf->cv, &pf->mu);
    int stop = pf->stop;
    pthread_mutex_unlock(&pf->mu);
    return stop ? NULL : s;
}

static void publish(Prefetch *pf, Slot *s) {
    pthread_mutex_lock(&pf->mu);
    s->state = SLOT_READY;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

static int grow(Slot *s, Py_ssize_t cap) {
    if (s->cap >= cap) return 1;
    unsigned char *b = realloc(s->buf, (size_t)cap);
    if (!b) return 0;
    s->buf = b;
    s->cap = cap;
    return 1;
}

/* The last newline in buf[:n], or NULL (memrchr is a GNU extension: macOS has none). */
static unsigned char *last_newline(unsigned char *buf, Py_ssize_t n) {
    while (n > 0) {
        if (buf[--n] == '\n') return buf + n;
    }
    return NULL;
}

static ssize_t pread_all(int fd, unsigned char *buf, Py_ssize_t n, int64_t at) {
    for (;;) {
        ssize_t got = pread(fd, buf, (size_t)n, (off_t)at);
        if (got >= 0 || errno != EINTR) return got;
    }
}

/* The offset after the next newline from `at`, -1 at the end of the file, -2 on a read error. */
static int64_t skip_line(int fd, int64_t at, unsigned char *buf, Py_ssize_t cap) {
    for (;;) {
        ssize_t n = pread_all(fd, buf, cap, at);
        if (n < 0) return -2;
        if (n == 0) return -1;
        unsigned char *nl = memchr(buf, '\n', (size_t)n);
        if (nl) return at + (nl - buf) + 1;
        at += n;
    }
}

static void *producer(void *arg) {
    Prefetch *pf = arg;
    unsigned char *carry = NULL;
    Py_ssize_t carry_len = 0, carry_cap = 0;
    int64_t base = pf->start, line = pf->first_line;
    int k = 0;
    for (;;) {
        Slot *s = free_slot(pf, k);
        if (!s) break;
        k = (k + 1) % NSLOTS;
        s->err = 0;
        /* Never more than max_line: a line that does not fit is a line too long (as in scan.py). */
        Py_ssize_t want = pf->chunk > carry_len + 65536 ? pf->chunk : carry_len + 65536;
        if (want > pf->max_line) want = pf->max_line;
        if (!grow(s, want)) {
            s->kind = EV_ERROR;
            s->err = ENOMEM;
            publish(pf, s);
            break;
        }
        if (carry_len) memcpy(s->buf, carry, (size_t)carry_len);
        Py_ssize_t have = carry_len, end = 0;
        carry_len = 0;
        int kind = EV_CHUNK;
        for (;;) {
            if (have == s->cap) {
                if (have >= pf->max_line) {
                    int64_t next = skip_line(pf->fd, base + have, s->buf, s->cap);
                    if (next == -2) {
                        kind = EV_ERROR;
                        s->err = errno;
                    } else if (next == -1) {
                        kind = EV_END; /* a long last line without its newline: left unconsumed */
                    } else {
                        kind = EV_TOO_LONG;
                        base = next;
                    }
                    break;
                }
                Py_ssize_t cap = s->cap * 2 < pf->max_line ? s->cap * 2 : pf->max_line;
                if (!grow(s, cap)) {
                    kind = EV_ERROR;
                    s->err = ENOMEM;
                    break;
                }
            }
            ssize_t n = pread_all(pf->fd, s->buf + have, s->cap - have, base + have);
            if (n < 0) {
                kind = EV_ERROR;
                s->err = errno;
                break;
            }
            if (n == 0) {
                kind = EV_END;
                break;
            }
            have += n;
            unsigned char *nl = last_newline(s->buf, have);
            if (nl) {
                end = nl - s->buf + 1;
                break;
            }
        }
        s->base = base;
        if (kind != EV_CHUNK) {
            s->kind = kind;
            publish(pf, s);
            if (kind == EV_TOO_LONG) {
                line++;
                continue;
            }
            break;
        }
        s->kind = EV_CHUNK;
        s->end = end;
        s->status = scan_lines(s->buf, end, base, pf->max_depth, line, &s->outs);
        if (s->status == 1) {
            line += s->outs.offsets.len / 8;
        } else {
            for (const unsigned char *p = s->buf, *e = s->buf + end; (p = memchr(p, '\n', (size_t)(e - p))); p++) line++;
        }
        carry_len = have - end;
        if (carry_len > carry_cap) {
            unsigned char *c = realloc(carry, (size_t)carry_len);
            if (!c) {
                s->kind = EV_ERROR;
                s->err = ENOMEM;
                publish(pf, s);
                break;
            }
            carry = c;
            carry_cap = carry_len;
        }
        if (carry_len) memcpy(carry, s->buf + end, (size_t)carry_len);
        base += end;
        publish(pf, s);
    }
    free(carry);
    return NULL;
}

static void prefetch_stop(Prefetch *pf) {
    if (!pf->started || pf->joined) return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = 1;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(pf->thread, NULL);
    Py_END_ALLOW_THREADS
    pf->joined = 1;
}

static int prefetch_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    Prefetch *pf = (Prefetch *)self;
    static char *names[] = {"fd", "start", "max_depth", "chunk", "max_line", "first_line", NULL};
    int fd, max_depth;
    long long start, first_line;
    Py_ssize_t chunk, max_line;
    if (pf->started) {
        PyErr_SetString(PyExc_RuntimeError, "Prefetch is already started");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iLinnL", names, &fd, &start, &max_depth, &chunk, &max_line,
                                     &first_line))
        return -1;
    if (chunk < 4096 || max_line < chunk) {
        PyErr_SetString(PyExc_ValueError, "chunk must be at least 4096 and max_line at least chunk");
        return -1;
    }
    pf->fd = fd;
    pf->start = start;
    pf->first_line = first_line;
    pf->max_depth = max_depth;
    pf->chunk = chunk;
    pf->max_line = max_line;
    pf->taken = -1;
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->cv, NULL);
    if (pthread_create(&pf->thread, NULL, producer, pf) != 0) {
        pthread_cond_destroy(&pf->cv);
        pthread_mutex_destroy(&pf->mu);
        PyErr_SetString(PyExc_OSError, "cannot start the prefetch thread");
        return -1;
    }
    pf->started = 1;
    return 0;
}

static void release_taken(Prefetch *pf) {
    if (pf->taken < 0) return;
    pthread_mutex_lock(&pf->mu);
    pf->slots[pf->taken].state = SLOT_FREE;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    pf->taken = -1;
}

PyDoc_STRVAR(prefetch_next_doc,
"next() -> (kind, base, end, scanned) or None at the end of the file\n\n"
"kind 1: a chunk of complete lines from offset base, end bytes long; scanned is scan_chunk's tuple, or\n"
"None when it declined the chunk (read its bytes with data()). kind 2: a line longer than max_line was\n"
"skipped (base: the offset after it). At the end, `offset` holds where the complete lines end.");

static PyObject *prefetch_next(PyObject *self, PyObject *unused) {
    Prefetch *pf = (Prefetch *)self;
    (void)unused;
    if (!pf->started || pf->joined) {
        PyErr_SetString(PyExc_ValueError, "Prefetch is closed");
        return NULL;
    }
    if (pf->ended) Py_RETURN_NONE; /* the thread has stopped: nothing more will come */
    release_taken(pf);
    Slot *s = &pf->slots[pf->next_read];
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&pf->mu);
    while (s->state != SLOT_READY) pthread_cond_wait(&pf->cv, &pf->mu);
    s->state = SLOT_TAKEN;
    pthread_mutex_unlock(&pf->mu);
    Py_END_ALLOW_THREADS
    pf->taken = pf->next_read;
    pf->next_read = (pf->next_read + 1) % NSLOTS;
    pf->start = s->base;
    switch (s->kind) {
    case EV_CHUNK: {
        PyObject *scanned;
        if (s->status < 0) return PyErr_NoMemory();
        if (s->status == 0) scanned = Py_NewRef(Py_None);
        else scanned = outs_tuple(&s->outs);
        if (!scanned) return NULL;
        pf->start = s->base + s->end;
        return Py_BuildValue("(iLnN)", EV_CHUNK, (long long)s->base, s->end, scanned);
    }
    case EV_TOO_LONG:
        return Py_BuildValue("(iLnO)", EV_TOO_LONG, (long long)s->base, (Py_ssize_t)0, Py_None);
    case EV_END:
        pf->ended = 1;
        Py_RETURN_NONE;
    default:
        pf->ended = 1;
        errno = s->err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
}

static PyObject *prefetch_data(PyObject *self, PyObject *unused) {
    Prefetch *pf = (Prefetch *)self;
    (void)unused;
    if (pf->taken < 0 || pf->slots[pf->taken].kind != EV_CHUNK) {
        PyErr_SetString(PyExc_ValueError, "no chunk is held");
        return NULL;
    }
    Slot *s = &pf->slots[pf->taken];
    return bytes_of(s->buf, s->end);
}

static PyObject *prefetch_close(PyObject *self, PyObject *unused) {
    (void)unused;
    prefetch_stop((Prefetch *)self);
    Py_RETURN_NONE;
}

static PyObject *prefetch_offset(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(((Prefetch *)self)->start);
}

static void prefetch_dealloc(PyObject *self) {
    Prefetch *pf = (Prefetch *)self;
    if (pf->started) {
        if (!pf->joined) {
            pthread_mutex_lock(&pf->mu);
            pf->stop = 1;
            pthread_cond_broadcast(&pf->cv);
            pthread_mutex_unlock(&pf->mu);
            pthread_join(pf->thread, NULL);
        }
        pthread_cond_destroy(&pf->cv);
        pthread_mutex_destroy(&pf->mu);
    }
    for (int k = 0; k < NSLOTS; k++) {
        free(pf->slots[k].buf);
        outs_free(&pf->slots[k].outs);
    }
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef prefetch_methods[] = {
    {"next", prefetch_next, METH_NOARGS, prefetch_next_doc},
    {"data", prefetch_data, METH_NOARGS, "The bytes of the chunk next() returned last."},
    {"close", prefetch_close, METH_NOARGS, "Stop the thread and wait for it (the fd may be closed after)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef prefetch_getset[] = {
    {"offset", prefetch_offset, NULL, "Where the chunks handed out so far end.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot prefetch_slots[] = {
    {Py_tp_doc, "Prefetch(fd, start, max_depth, chunk, max_line, first_line): read and scan a file ahead on a native thread."},
    {Py_tp_init, prefetch_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, prefetch_dealloc},
    {Py_tp_methods, prefetch_methods},
    {Py_tp_getset, prefetch_getset},
    {0, NULL},
};

static PyType_Spec prefetch_spec = {"ctxd._native.Prefetch", sizeof(Prefetch), 0, Py_TPFLAGS_DEFAULT, prefetch_slots};
#endif

static PyMethodDef methods[] = {
    {"scan_chunk", scan_chunk, METH_VARARGS, scan_chunk_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ctxd._native", "ctxd's native scanner (see ctxd/store/native.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", 1) < 0) goto fail;
#ifndef _WIN32
    PyObject *tp = PyType_FromSpec(&prefetch_spec);
    if (!tp || PyModule_AddObject(m, "Prefetch", tp) < 0) {
        Py_XDECREF(tp);
        goto fail;
    }
#endif
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
