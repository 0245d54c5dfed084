/* Python's binary operators on template values: + - * / // % ** and ~ (tpl_arith),
 * `in` (tpl_contains) and the comparisons (tpl_compare_op), with Python's results and
 * its TypeErrors, overflow checked, Markup escaping what is added to it. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "template/tpl_internal.h"

tpl_value tpl_arith(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b)
{
    if (op[0] == '~' ) {
        tpl_value x = tpl_to_str(r, a), y = tpl_to_str(r, b);
        char *d = tpl_alloc(&r->arena, x.len + y.len + 1);
        memcpy(d, x.u.s, x.len);
        memcpy(d + x.len, y.u.s, y.len);
        return tpl_str(d, x.len + y.len);
    }
    tpl_require_defined(r, at, a);
    tpl_require_defined(r, at, b);
    bool nums = tpl_is_number(a) && tpl_is_number(b);
    bool ints = nums && a.type != TV_FLOAT && b.type != TV_FLOAT;
    int64_t x = a.type == TV_BOOL ? a.u.b : a.u.i, y = b.type == TV_BOOL ? b.u.b : b.u.i;
    double fx = tpl_as_double(a), fy = tpl_as_double(b);
    switch (op[0]) {
    case '+':
        if (ints) {
            int64_t z;
            if (__builtin_add_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in +");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx + fy);
        if (a.type == TV_STR && b.type == TV_STR) {
            bool safe = a.is_safe || b.is_safe; /* Markup + str escapes the str */
            if (safe) {
                a = tpl_escape(r, a);
                b = tpl_escape(r, b);
            }
            char *d = tpl_alloc(&r->arena, a.len + b.len + 1);
            memcpy(d, a.u.s, a.len);
            memcpy(d + a.len, b.u.s, b.len);
            tpl_value out = tpl_str(d, a.len + b.len);
            out.is_safe = safe;
            return out;
        }
        if (a.type == TV_LIST && b.type == TV_LIST && !a.is_gen && !b.is_gen) {
            tpl_value l = tpl_new_list(&r->arena, a.u.list->n + b.u.list->n);
            for (size_t i = 0; i < a.u.list->n; i++)
                tpl_list_push(&r->arena, l.u.list, a.u.list->items[i]);
            for (size_t i = 0; i < b.u.list->n; i++)
                tpl_list_push(&r->arena, l.u.list, b.u.list->items[i]);
            l.is_tuple = a.is_tuple;
            return l;
        }
        if (a.type == TV_STR)
            tpl_fail(r, at, "can only concatenate str (not \"%s\") to str", tpl_type_name(b));
        if (a.type == TV_LIST)
            tpl_fail(r, at, "can only concatenate list (not \"%s\") to list", tpl_type_name(b));
        break;
    case '-':
        if (ints) {
            int64_t z;
            if (__builtin_sub_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in -");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx - fy);
        break;
    case '*':
        if (op[1] == '*') { /* ** */
            if (ints && y >= 0) { /* by squaring: 64 rounds at most */
                int64_t z = 1, base = x;
                for (int64_t e = y; e; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(z, base, &z))
                        tpl_fail(r, at, "integer overflow in **");
                    if (e > 1 && __builtin_mul_overflow(base, base, &base))
                        tpl_fail(r, at, "integer overflow in **");
                }
                return tpl_int(z);
            }
            if (nums) {
                if (fx == 0 && fy < 0)
                    tpl_fail(r, at, "0.0 cannot be raised to a negative power");
                if (fx < 0 && fy != floor(fy))
                    tpl_fail(r, at, "a negative number to a fractional power is complex");
                double z = pow(fx, fy);
                if (isinf(z) && !isinf(fx) && !isinf(fy))
                    tpl_fail(r, at, "numerical result out of range in **");
                return tpl_float(z);
            }
            break;
        }
        if (ints) {
            int64_t z;
            if (__builtin_mul_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in *");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx * fy);
        if ((a.type == TV_LIST && !a.is_gen && (b.type == TV_INT || b.type == TV_BOOL)) ||
            (b.type == TV_LIST && !b.is_gen && (a.type == TV_INT || a.type == TV_BOOL))) {
            tpl_value list = a.type == TV_LIST ? a : b;
            int64_t times = a.type == TV_LIST ? y : x;
            size_t n = list.u.list->n;
            if (times <= 0 || n == 0)
                return tpl_new_list(&r->arena, 0);
            if ((uint64_t)times * n > r->opt.limits.max_iterations)
                tpl_fail(r, at, "a repeated list would pass the iteration limit of %" PRIu64, r->opt.limits.max_iterations);
            tpl_value l = tpl_new_list(&r->arena, (size_t)times * n);
            for (int64_t k = 0; k < times; k++)
                memcpy(l.u.list->items + (size_t)k * n, list.u.list->items, n * sizeof(tpl_value));
            l.u.list->n = (size_t)times * n;
            l.is_tuple = list.is_tuple;
            return l;
        }
        if ((a.type == TV_STR && (b.type == TV_INT || b.type == TV_BOOL)) ||
            (b.type == TV_STR && (a.type == TV_INT || a.type == TV_BOOL))) {
            tpl_value str = a.type == TV_STR ? a : b;
            int64_t times = a.type == TV_STR ? y : x;
            if (times <= 0)
                return tpl_str("", 0);
            if ((uint64_t)times * str.len > r->opt.limits.max_output)
                tpl_fail(r, at, "a repeated string would pass the output limit of %zu bytes", r->opt.limits.max_output);
            size_t n = (size_t)times * str.len;
            char *d = tpl_alloc(&r->arena, n + 1);
            for (int64_t k = 0; k < times; k++)
                memcpy(d + (size_t)k * str.len, str.u.s, str.len);
            return tpl_str(d, n);
        }
        break;
    case '/':
        if (op[1] == '/') {
            if (!nums)
                break;
            if (ints) {
                if (y == 0)
                    tpl_fail(r, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1)
                    tpl_fail(r, at, "integer overflow in //");
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0)))
                    q--;
                return tpl_int(q);
            }
            if (fy == 0)
                tpl_fail(r, at, "float floor division by zero");
            return tpl_float(floor(fx / fy));
        }
        if (!nums)
            break;
        if (fy == 0)
            tpl_fail(r, at, "division by zero");
        return tpl_float(fx / fy);
    case '%':
        if (a.type == TV_STR) {
            tpl_call_args args = {0};
            if (a.is_safe) { /* Markup % args escapes the args */
                if (b.type == TV_LIST && b.is_tuple) {
                    tpl_value t = tpl_new_list(&r->arena, b.u.list->n);
                    for (size_t i = 0; i < b.u.list->n; i++)
                        t.u.list->items[i] = b.u.list->items[i].type == TV_STR || b.u.list->items[i].type == TV_NONE
                                                 ? tpl_escape(r, b.u.list->items[i]) : b.u.list->items[i];
                    t.u.list->n = b.u.list->n;
                    t.is_tuple = true;
                    b = t;
                } else if (b.type == TV_STR) {
                    b = tpl_escape(r, b);
                }
            }
            tpl_value one[1] = {b};
            if (b.type == TV_LIST && b.is_tuple) {
                args.pos = b.u.list->items;
                args.npos = b.u.list->n;
            } else {
                args.pos = one;
                args.npos = 1;
            }
            tpl_value f = tpl_filter(r, at, "format", a, &args);
            f.is_safe = a.is_safe;
            return f;
        }
        if (ints) {
            if (y == 0)
                tpl_fail(r, at, "integer division or modulo by zero");
            if (y == -1)
                return tpl_int(0);
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return tpl_int(m);
        }
        if (nums) {
            if (fy == 0)
                tpl_fail(r, at, "float modulo");
            double m = fmod(fx, fy);
            if (m != 0 && ((m < 0) != (fy < 0)))
                m += fy;
            return tpl_float(m);
        }
        break;
    default:
        break;
    }
    tpl_fail(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, tpl_type_name(a), tpl_type_name(b));
}

bool tpl_contains(tpl_render *r, const tpl_node *at, tpl_value item, tpl_value seq)
{
    switch (seq.type) {
    case TV_UNDEFINED: return false;
    case TV_STR:
        if (item.type != TV_STR)
            tpl_fail(r, at, "'in <string>' requires string as left operand, not %s", tpl_type_name(item));
        if (item.len == 0)
            return true;
        for (size_t i = 0; i + item.len <= seq.len; i++)
            if (memcmp(seq.u.s + i, item.u.s, item.len) == 0)
                return true;
        return false;
    case TV_LIST:
        for (size_t i = 0; i < seq.u.list->n; i++)
            if (tpl_equal(seq.u.list->items[i], item))
                return true;
        return false;
    case TV_DICT:
    case TV_NAMESPACE:
        return tpl_dict_get(seq.u.dict, item) != NULL;
    default:
        tpl_fail(r, at, "argument of type '%s' is not iterable", tpl_type_name(seq));
    }
}

bool tpl_compare_op(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b)
{
    /* the operators are the parser's strings: ==, !=, in, not in, <, <=, >, >= */
    switch (op[0]) {
    case '=': return tpl_equal(a, b);
    case '!': return !tpl_equal(a, b);
    case 'i': return tpl_contains(r, at, a, b);
    case 'n': return !tpl_contains(r, at, a, b);
    default: break;
    }
    tpl_require_defined(r, at, a);
    tpl_require_defined(r, at, b);
    int c;
    if (!tpl_compare(a, b, &c))
        tpl_fail(r, at, "'%s' not supported between instances of '%s' and '%s'", op, tpl_type_name(a), tpl_type_name(b));
    if (op[0] == '<')
        return op[1] == '=' ? c <= 0 : c < 0;
    return op[1] == '=' ? c >= 0 : c > 0;
}

