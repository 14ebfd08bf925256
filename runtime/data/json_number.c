/* clank_json_format_number: ECMAScript Number::toString (ECMA-262).
   The digits are the shortest that read back to the same double; the layout
   (plain, "0.000ddd" or "d.ddde+x") follows the standard's four cases. */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/json.h"
#include "data/json_scan.h"

/* Reads "d.ddde±x" (any decimal point character: snprintf follows the locale)
   into its significant digits and returns the decimal exponent. */
static int split_e(const char *s, char *digits, int *k) {
  int n = 0;
  const char *p = s;
  for (; *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[n++] = *p;
  *k = n;
  return atoi(p + 1);
}

/* Adds (dir = 1) or takes (dir = -1) one unit in the last of k digits; returns
   0 when the result would need another digit or lose its leading one. */
static int step_digits(char *digits, int k, int dir) {
  int i = k - 1;
  for (; i >= 0; i--) {
    char c = (char)(digits[i] + dir);
    if (c >= '0' && c <= '9') {
      digits[i] = c;
      break;
    }
    digits[i] = dir > 0 ? '0' : '9';
  }
  return i >= 0 && digits[0] != '0';
}

/* The double nearest to 0.digits[0..k) x 10^(e+1), read without a decimal
   point so that the locale has no say. */
static double read_back(const char *digits, int k, int e) {
  char s[48], *o = s + k;
  memcpy(s, digits, (size_t)k);
  int x = e - (k - 1);
  *o++ = 'e';
  if (x < 0) {
    *o++ = '-';
    x = -x;
  }
  char rev[8];
  int n = 0;
  do rev[n++] = (char)('0' + x % 10);
  while ((x /= 10) > 0);
  while (n > 0) *o++ = rev[--n];
  *o = '\0';
  return strtod(s, NULL);
}

/* The 40 significant digits in all are d correctly rounded; rounding them
   again to p < 18 places is exact unless they end in a tie ("5000..."), which
   may not be one in d itself: printf decides those. Returns the exponent. */
static int round_to(double d, const char *all, int e, int p, char *digits) {
  const char *r = all + p, *end = all + 40;
  int up = *r > '5';
  memcpy(digits, all, (size_t)p);
  if (*r == '5') {
    while (++r < end && *r == '0') {}
    if (r == end) {
      char s[48];
      int k;
      snprintf(s, sizeof s, "%.*e", p - 1, d);
      return split_e(s, digits, &k);
    }
    up = 1;
  }
  if (up) {
    int i = p - 1;
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i < 0) { /* 9.99 -> 10.0 */
      digits[0] = '1';
      e++;
    } else
      digits[i]++;
  }
  return e;
}

/* Whether p significant digits can name d exactly (d > 0, finite): the
   correctly rounded p-digit decimal is the nearest, but at a power of two the
   rounding interval of d is lopsided, so the neighbour on the far side can
   read back when the nearest does not: try it too. Fills digits and *e. */
static int fits(double d, const char *all, int e0, int p, char *digits, int *e) {
  *e = round_to(d, all, e0, p, digits);
  double r = read_back(digits, p, *e);
  if (r == d) return 1;
  return p < 17 && step_digits(digits, p, r < d ? 1 : -1) && read_back(digits, p, *e) == d;
}

/* Shortest digits of d > 0: fitting is monotone in p (every p-digit decimal
   is a (p+1)-digit one), so search 1..17; 17 digits always fit. One printf
   gives 40 digits to round from. */
static int shortest(double d, char *digits, int *k) {
  char s[64], all[48], tmp[24];
  int n;
  snprintf(s, sizeof s, "%.39e", d);
  int e0 = split_e(s, all, &n);
  int lo = 1, hi = 17, e = 0, te, found = 0;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (fits(d, all, e0, mid, tmp, &te)) {
      hi = mid;
      memcpy(digits, tmp, (size_t)mid);
      e = te;
      found = mid;
    } else
      lo = mid + 1;
  }
  if (found != lo) fits(d, all, e0, lo, digits, &e);
  *k = lo;
  while (*k > 1 && digits[*k - 1] == '0') (*k)--; /* 1.50e+00 has two digits */
  return e;
}

/* The decimal digits of v at o, NUL-terminated; returns their count. By
   hand: an integral float (an estimate of 2, a price of 10) is the common
   case, and sprintf costs ten times as much. */
static size_t put_digits(char *o, uint64_t v) {
  char rev[20];
  size_t n = 0;
  do rev[n++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  for (size_t i = 0; i < n; i++) o[i] = rev[n - 1 - i];
  o[n] = '\0';
  return n;
}

const double clank_json_exact_tens[CLANK_JSON_EXACT_TENS] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Shortest digits of a d > 0 that is not an integer, for the common case of a
   decimal with few places (an estimate of 1.5, a price of 4.35): the fewest
   places j for which an integer m has m / 10^j == d. Both operands are exact,
   so the quotient is the double nearest to m x 10^-j, which is what reading
   that decimal gives. While d x 10^j < 2^50, the decimals with j places that
   read back to d lie within a quarter of a unit of it (its rounding interval is
   d x 2^-52 wide), so there is one at most and rounding the product (which
   errs by an eighth at most) finds it; fewer places means fewer digits, so the
   first j is the shortest. Sets the digits, their count *k and the exponent *n
   (d = 0.digits x 10^n); returns 0, for shortest() to answer, when none fits
   below 2^50 (17 digits, a power of two's lopsided interval, tiny numbers). */
static int few_places(double d, char *digits, int *k, int *n) {
  for (int j = 1; j < CLANK_JSON_EXACT_TENS; j++) {
    double scaled = d * clank_json_exact_tens[j];
    if (scaled >= 1125899906842624.0) return 0; /* 2^50 */
    double m = floor(scaled + 0.5);
    if (m / clank_json_exact_tens[j] != d) continue;
    int len = (int)put_digits(digits, (uint64_t)m);
    *n = len - j;
    while (len > 1 && digits[len - 1] == '0') len--;
    *k = len;
    return 1;
  }
  return 0;
}

size_t clank_json_format_number(double d, char *out) {
  char digits[24], *o = out;
  if (isnan(d)) return (size_t)sprintf(out, "NaN");
  if (isinf(d)) return (size_t)sprintf(out, d < 0 ? "-Infinity" : "Infinity");
  if (d == 0) return put_digits(out, 0); /* -0 too */
  if (d < 0) {
    *o++ = '-';
    d = -d;
  }
  if (d < 9007199254740992.0 && d == floor(d)) /* exact integer: its own digits */
    return (size_t)(o - out) + put_digits(o, (uint64_t)d);
  int k, n; /* d = 0.digits x 10^n */
  if (!few_places(d, digits, &k, &n)) n = shortest(d, digits, &k) + 1;
  if (k <= n && n <= 21) { /* 123000 */
    memcpy(o, digits, (size_t)k);
    memset(o + k, '0', (size_t)(n - k));
    o += n;
  } else if (0 < n && n <= 21) { /* 12.3 */
    memcpy(o, digits, (size_t)n);
    o[n] = '.';
    memcpy(o + n + 1, digits + n, (size_t)(k - n));
    o += k + 1;
  } else if (-6 < n && n <= 0) { /* 0.00123 */
    *o++ = '0';
    *o++ = '.';
    memset(o, '0', (size_t)-n);
    o += -n;
    memcpy(o, digits, (size_t)k);
    o += k;
  } else { /* 1.23e+21, 1e-7 */
    *o++ = digits[0];
    if (k > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(k - 1));
      o += k - 1;
    }
    o += sprintf(o, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
  }
  *o = '\0';
  return (size_t)(o - out);
}
