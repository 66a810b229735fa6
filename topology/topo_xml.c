/* A small XML reader: enough for NCCL topology files, and for telling a
 * malformed file apart before hwloc's parser prints its own complaints.
 *
 * It reads the whole file, parses it in place (names and values become
 * NUL-terminated strings inside the buffer, entities decoded) and builds a
 * tree of elements; text content is checked and dropped, since neither
 * format keeps data in it.  Not supported, and reported: DTD internal
 * subsets with markup, unknown named entities. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/common/status.h"
#include "topology/topo.h"

/* Limits that keep a hostile file from costing more than its size. */
#define ZC_XML_MAX_BYTES (64u << 20)
#define ZC_XML_MAX_DEPTH 256

struct zc_xml_doc {
    char *buf;
    zc_xml_node_t *root;
    zc_xml_node_t **nodes;   /* every node, for freeing */
    int num_nodes;
    int cap_nodes;
};

typedef struct {
    zc_xml_doc_t *doc;
    char *p;
    char *end;
    const char *path;
    const char *argname;
} zc_xml_parser_t;

static int zc_xml_line(const zc_xml_parser_t *ps)
{
    int line = 1;

    for (const char *c = ps->doc->buf; c < ps->p && c < ps->end; c++)
        line += (*c == '\n');
    return line;
}

#define zc_xml_fail(ps, what)                                                   \
    zc_error(ZC_ERR_TOPOLOGY, "%s: %s:%d: malformed XML: %s", (ps)->argname,      \
             (ps)->path, zc_xml_line(ps), (what))

static int zc_xml_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int zc_xml_is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == ':' || (unsigned char)c >= 0x80;
}

static void zc_xml_skip_space(zc_xml_parser_t *ps)
{
    while (ps->p < ps->end && zc_xml_is_space(*ps->p))
        ps->p++;
}

static int zc_xml_starts(const zc_xml_parser_t *ps, const char *s)
{
    size_t n = strlen(s);

    return (size_t)(ps->end - ps->p) >= n && memcmp(ps->p, s, n) == 0;
}

/* Skip past the next `term`; ZC_ERR_TOPOLOGY naming `what` if absent. */
static zc_status_t zc_xml_skip_past(zc_xml_parser_t *ps, const char *term, const char *what)
{
    size_t n = strlen(term);

    for (; ps->p + n <= ps->end; ps->p++) {
        if (memcmp(ps->p, term, n) == 0) {
            ps->p += n;
            return ZC_OK;
        }
    }
    return zc_xml_fail(ps, what);
}

/* Comments, processing instructions and the DOCTYPE line. */
static zc_status_t zc_xml_skip_misc(zc_xml_parser_t *ps, int *skipped)
{
    *skipped = 1;
    if (zc_xml_starts(ps, "<!--"))
        return zc_xml_skip_past(ps, "-->", "unterminated comment");
    if (zc_xml_starts(ps, "<?"))
        return zc_xml_skip_past(ps, "?>", "unterminated processing instruction");
    if (zc_xml_starts(ps, "<![CDATA["))
        return zc_xml_skip_past(ps, "]]>", "unterminated CDATA section");
    if (zc_xml_starts(ps, "<!DOCTYPE")) {
        for (; ps->p < ps->end && *ps->p != '>'; ps->p++)
            if (*ps->p == '[')
                return zc_xml_fail(ps, "DOCTYPE internal subsets are not supported");
        if (ps->p == ps->end)
            return zc_xml_fail(ps, "unterminated DOCTYPE");
        ps->p++;
        return ZC_OK;
    }
    *skipped = 0;
    return ZC_OK;
}

/* Decode entities of [s, e) in place and NUL-terminate the result. */
static zc_status_t zc_xml_decode(zc_xml_parser_t *ps, char *s, char *e)
{
    static const struct {
        const char *name;
        char c;
    } entities[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    char *out = s;

    while (s < e) {
        if (*s != '&') {
            *out++ = *s++;
            continue;
        }
        s++;
        if (*s == '#') {
            char *stop;
            long code = (s[1] == 'x') ? strtol(s + 2, &stop, 16) : strtol(s + 1, &stop, 10);
            if (stop >= e || *stop != ';' || code <= 0 || code > 0x7f)
                return zc_xml_fail(ps, "unsupported character reference");
            *out++ = (char)code;
            s = stop + 1;
            continue;
        }
        size_t i;
        for (i = 0; i < sizeof(entities) / sizeof(entities[0]); i++) {
            size_t n = strlen(entities[i].name);
            if ((size_t)(e - s) >= n && memcmp(s, entities[i].name, n) == 0) {
                *out++ = entities[i].c;
                s += n;
                break;
            }
        }
        if (i == sizeof(entities) / sizeof(entities[0]))
            return zc_xml_fail(ps, "unknown entity");
    }
    *out = '\0';
    return ZC_OK;
}

static zc_status_t zc_xml_new_node(zc_xml_parser_t *ps, zc_xml_node_t *parent,
                                   zc_xml_node_t **node)
{
    zc_xml_doc_t *doc = ps->doc;
    zc_xml_node_t *n = NULL;

    if (doc->num_nodes == doc->cap_nodes) {
        int cap = doc->cap_nodes ? 2 * doc->cap_nodes : 64;
        zc_xml_node_t **grown = realloc(doc->nodes, (size_t)cap * sizeof(*grown));
        if (!grown)
            return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate XML nodes");
        doc->nodes = grown;
        doc->cap_nodes = cap;
    }
    n = calloc(1, sizeof(*n));
    if (!n)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate an XML node");
    doc->nodes[doc->num_nodes++] = n;
    n->parent = parent;
    if (parent) {
        if (parent->last_child)
            parent->last_child->next_sibling = n;
        else
            parent->first_child = n;
        parent->last_child = n;
    }
    *node = n;
    return ZC_OK;
}

static zc_status_t zc_xml_add_attr(zc_xml_parser_t *ps, zc_xml_node_t *node, const char *name,
                                   const char *value)
{
    const char **grown = realloc(node->attrs, (size_t)(node->num_attrs + 1) * 2 * sizeof(*grown));

    if (!grown)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate XML attributes");
    node->attrs = grown;
    node->attrs[2 * node->num_attrs] = name;
    node->attrs[2 * node->num_attrs + 1] = value;
    node->num_attrs++;
    return ZC_OK;
}

/* A name at ps->p; NUL-terminating it is left to the caller, who knows
 * which character after it may be overwritten. */
static char *zc_xml_name(zc_xml_parser_t *ps)
{
    char *start = ps->p;

    while (ps->p < ps->end && zc_xml_is_name_char(*ps->p))
        ps->p++;
    return ps->p == start ? NULL : start;
}

/* Parse a start tag after its '<': name, attributes, then '>' or '/>'. */
static zc_status_t zc_xml_start_tag(zc_xml_parser_t *ps, zc_xml_node_t *parent,
                                    zc_xml_node_t **node, int *empty)
{
    char *name = zc_xml_name(ps);
    zc_xml_node_t *n = NULL;

    if (!name)
        return zc_xml_fail(ps, "element name expected after '<'");
    ZC_CHECK(zc_xml_new_node(ps, parent, &n));
    char *name_end = ps->p;
    for (;;) {
        int had_space = ps->p < ps->end && zc_xml_is_space(*ps->p);
        zc_xml_skip_space(ps);
        if (ps->p >= ps->end)
            return zc_xml_fail(ps, "unterminated start tag");
        if (*ps->p == '>' || zc_xml_starts(ps, "/>")) {
            *empty = (*ps->p == '/');
            ps->p += *empty ? 2 : 1;
            *name_end = '\0';
            n->name = name;
            *node = n;
            return ZC_OK;
        }
        if (!had_space)
            return zc_xml_fail(ps, "space expected between attributes");
        char *attr = zc_xml_name(ps);
        if (!attr)
            return zc_xml_fail(ps, "attribute name expected");
        char *attr_end = ps->p;
        zc_xml_skip_space(ps);
        if (ps->p >= ps->end || *ps->p != '=')
            return zc_xml_fail(ps, "'=' expected after attribute name");
        ps->p++;
        zc_xml_skip_space(ps);
        if (ps->p >= ps->end || (*ps->p != '"' && *ps->p != '\''))
            return zc_xml_fail(ps, "quoted attribute value expected");
        char quote = *ps->p++;
        char *value = ps->p;
        while (ps->p < ps->end && *ps->p != quote && *ps->p != '<')
            ps->p++;
        if (ps->p >= ps->end || *ps->p != quote)
            return zc_xml_fail(ps, "unterminated attribute value");
        char *value_end = ps->p++;
        /* The name may end right at '=' which we already consumed, so it
         * can be terminated now; the value is decoded in place. */
        *attr_end = '\0';
        ZC_CHECK(zc_xml_decode(ps, value, value_end));
        ZC_CHECK(zc_xml_add_attr(ps, n, attr, value));
    }
}

/* Parse the content of `node` up to and including its end tag. */
static zc_status_t zc_xml_content(zc_xml_parser_t *ps, zc_xml_node_t *node, int depth)
{
    int skipped;

    if (depth > ZC_XML_MAX_DEPTH)
        return zc_xml_fail(ps, "elements nested too deeply");
    for (;;) {
        while (ps->p < ps->end && *ps->p != '<')
            ps->p++;
        if (ps->p >= ps->end)
            return zc_xml_fail(ps, "premature end of file inside an element");
        ZC_CHECK(zc_xml_skip_misc(ps, &skipped));
        if (skipped)
            continue;
        if (zc_xml_starts(ps, "</")) {
            ps->p += 2;
            char *name = zc_xml_name(ps);
            size_t len = name ? (size_t)(ps->p - name) : 0;
            zc_xml_skip_space(ps);
            if (ps->p >= ps->end || *ps->p != '>')
                return zc_xml_fail(ps, "unterminated end tag");
            ps->p++;
            if (!name || len != strlen(node->name) || memcmp(name, node->name, len) != 0)
                return zc_xml_fail(ps, "end tag does not match its start tag");
            return ZC_OK;
        }
        ps->p++;
        zc_xml_node_t *child;
        int empty;
        ZC_CHECK(zc_xml_start_tag(ps, node, &child, &empty));
        if (!empty)
            ZC_CHECK(zc_xml_content(ps, child, depth + 1));
    }
}

static zc_status_t zc_xml_document(zc_xml_parser_t *ps)
{
    int skipped, empty;

    if (zc_xml_starts(ps, "\xef\xbb\xbf"))
        ps->p += 3;
    for (;;) {
        zc_xml_skip_space(ps);
        if (ps->p >= ps->end)
            return zc_xml_fail(ps, "no root element (empty document)");
        ZC_CHECK(zc_xml_skip_misc(ps, &skipped));
        if (!skipped)
            break;
    }
    if (*ps->p != '<')
        return zc_xml_fail(ps, "text before the root element");
    ps->p++;
    ZC_CHECK(zc_xml_start_tag(ps, NULL, &ps->doc->root, &empty));
    if (!empty)
        ZC_CHECK(zc_xml_content(ps, ps->doc->root, 1));
    for (;;) {
        zc_xml_skip_space(ps);
        if (ps->p >= ps->end)
            return ZC_OK;
        ZC_CHECK(zc_xml_skip_misc(ps, &skipped));
        if (!skipped)
            return zc_xml_fail(ps, "content after the root element");
    }
}

static zc_status_t zc_xml_read(const char *path, const char *argname, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *b;

    if (!f)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: cannot open %s: %s", argname, path,
                        strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return zc_error(ZC_ERR_INVALID_ARG, "%s: %s is not a regular file", argname, path);
    }
    if ((unsigned long long)st.st_size > ZC_XML_MAX_BYTES) {
        fclose(f);
        return zc_error(ZC_ERR_TOPOLOGY, "%s: %s is larger than %u MiB", argname, path,
                        ZC_XML_MAX_BYTES >> 20);
    }
    b = malloc((size_t)st.st_size + 1);
    if (!b) {
        fclose(f);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate %lld bytes for %s",
                        (long long)st.st_size, path);
    }
    size_t n = fread(b, 1, (size_t)st.st_size, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(b);
        return zc_error(ZC_ERR_SYSTEM, "%s: cannot read %s", argname, path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return ZC_OK;
}

zc_status_t zc_xml_parse_file(const char *path, const char *argname, zc_xml_doc_t **doc)
{
    zc_xml_doc_t *d = calloc(1, sizeof(*d));
    zc_status_t status;
    size_t len = 0;

    if (!d)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate an XML document");
    ZC_CHECK_GOTO(zc_xml_read(path, argname, &d->buf, &len), status, err_free);
    zc_xml_parser_t ps = {d, d->buf, d->buf + len, path, argname};
    if (memchr(d->buf, '\0', len)) {
        status = zc_error(ZC_ERR_TOPOLOGY, "%s: %s is not a text file", argname, path);
        goto err_free;
    }
    ZC_CHECK_GOTO(zc_xml_document(&ps), status, err_free);
    *doc = d;
    return ZC_OK;

err_free:
    zc_xml_free(d);
    return status;
}

const zc_xml_node_t *zc_xml_root(const zc_xml_doc_t *doc)
{
    return doc->root;
}

void zc_xml_free(zc_xml_doc_t *doc)
{
    if (!doc)
        return;
    for (int i = 0; i < doc->num_nodes; i++) {
        free(doc->nodes[i]->attrs);
        free(doc->nodes[i]);
    }
    free(doc->nodes);
    free(doc->buf);
    free(doc);
}

const char *zc_xml_attr(const zc_xml_node_t *node, const char *name)
{
    for (int i = 0; i < node->num_attrs; i++)
        if (strcmp(node->attrs[2 * i], name) == 0)
            return node->attrs[2 * i + 1];
    return NULL;
}
