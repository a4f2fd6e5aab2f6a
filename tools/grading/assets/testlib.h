// a2e-engine's testlib: a header that checkers and interactors include as "testlib.h".
//
// Written from the documented and observable behaviour of Mike Mirzayanov's testlib (0.9.45):
// the same API, exit codes, verdict words and messages, so that the checkers contest datasets
// ship (Codeforces, Polygon, Code-Contests-Plus) compile against it and judge as they do there.
// It is not testlib's code. What a checker relies on:
//
//   registerTestlibCmd(argc, argv)     checker <input> <output> <answer> [<result file>]
//   registerInteraction(argc, argv)    interactor <input> <output>; the participant's output on
//                                      stdin, its input on stdout
//   inf, ouf, ans                      the input, the participant's output, the jury's answer;
//                                      reading errors are PE on ouf, FAIL on inf and ans
//   quit/quitf/quitif/quitp            ends with ok 0, wa 1, pe 2, fail 3, points 7
//
// Verdicts go to stderr as one line: "ok ...", "wrong answer ...", "wrong output format ...",
// "FAIL ...", "points ...". Whatever the participant printed past an accepted verdict is
// "Extra information in the output file" (PE), as testlib's checkers judge it.
#ifndef A2E_TESTLIB_H
#define A2E_TESTLIB_H

#define VERSION "0.9.45-a2e"

// The longest token a stream reads, testlib's maxTokenLength (32 MiB, which a checker may
// change on a stream): past it, PE on the participant's output (FAIL on the jury's files).
#ifndef A2E_TESTLIB_MAX_TOKEN
#define A2E_TESTLIB_MAX_TOKEN (32u << 20)
#endif
// The longest line a stream reads, where testlib has no bound: an endless line, one that never
// reaches its end, would grow the checker or interactor to its memory limit and make a wrong
// answer a judge error. Past it, PE (FAIL on the jury's files).
#ifndef A2E_TESTLIB_MAX_LINE
#define A2E_TESTLIB_MAX_LINE (64u << 20)
#endif

#include <stdarg.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#define NORETURN __attribute__((noreturn))
#define I64 "%lld"
#define U64 "%llu"

#ifndef OK_EXIT_CODE
#define OK_EXIT_CODE 0
#endif
#ifndef WA_EXIT_CODE
#define WA_EXIT_CODE 1
#endif
#ifndef PE_EXIT_CODE
#define PE_EXIT_CODE 2
#endif
#ifndef FAIL_EXIT_CODE
#define FAIL_EXIT_CODE 3
#endif
#ifndef DIRT_EXIT_CODE
#define DIRT_EXIT_CODE 4
#endif
#ifndef POINTS_EXIT_CODE
#define POINTS_EXIT_CODE 7
#endif
#ifndef UNEXPECTED_EOF_EXIT_CODE
#define UNEXPECTED_EOF_EXIT_CODE 8
#endif
#ifndef PC_BASE_EXIT_CODE
#ifdef TESTSYS
#define PC_BASE_EXIT_CODE 50
#else
#define PC_BASE_EXIT_CODE 0
#endif
#endif

const char LF = '\n';
const char CR = '\r';
const char TAB = '\t';
const char SPACE = ' ';
const char EOFC = (char)255;

enum TResult {
    _ok = 0,
    _wa = 1,
    _pe = 2,
    _fail = 3,
    _dirt = 4,
    _points = 5,
    _unexpected_eof = 8,
    _partially = 16
};

#define _pc(exitCode) (TResult(_partially + (exitCode)))

enum TMode { _input, _output, _answer };

// -- text helpers ---------------------------------------------------------------------------

static inline std::string vformat_(const char* fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int size = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (size < 0) return std::string();
    std::string text((size_t)size + 1, '\0');
    vsnprintf(&text[0], text.size(), fmt, args);
    text.resize((size_t)size);
    return text;
}

#ifdef __GNUC__
__attribute__((format(printf, 1, 2)))
#endif
static inline std::string
format(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string text = vformat_(fmt, args);
    va_end(args);
    return text;
}

static inline bool isBlanks(char c) {
    return c == LF || c == CR || c == SPACE || c == TAB;
}

static inline std::string trim(const std::string& s) {
    size_t left = 0, right = s.size();
    while (left < right && isBlanks(s[left])) left++;
    while (right > left && isBlanks(s[right - 1])) right--;
    return s.substr(left, right - left);
}

static inline std::string upperCase(std::string s) {
    for (size_t i = 0; i < s.size(); i++)
        if ('a' <= s[i] && s[i] <= 'z') s[i] = char(s[i] - 'a' + 'A');
    return s;
}

static inline std::string lowerCase(std::string s) {
    for (size_t i = 0; i < s.size(); i++)
        if ('A' <= s[i] && s[i] <= 'Z') s[i] = char(s[i] - 'A' + 'a');
    return s;
}

// A text as a message shows it: NUL as '~', and past 64 characters its first 30 and last 31.
static inline std::string compress(const std::string& s) {
    std::string shown = s;
    std::replace(shown.begin(), shown.end(), '\0', '~');
    if (shown.size() <= 64) return shown;
    return shown.substr(0, 30) + "..." + shown.substr(shown.size() - 31);
}

static inline std::string englishEnding(int x) {
    x %= 100;
    if (x < 0) x = -x;
    if (x / 10 == 1) return "th";
    if (x % 10 == 1) return "st";
    if (x % 10 == 2) return "nd";
    if (x % 10 == 3) return "rd";
    return "th";
}

template <typename T>
static inline std::string vtos(const T& t) {
    std::ostringstream out;
    out << t;
    std::string text = out.str();
    size_t blank = text.find_first_of(" \t\r\n");
    return blank == std::string::npos ? text : text.substr(0, blank);
}

static inline std::string vtos(long long n) {
    if (n == LLONG_MIN) return "-9223372036854775808";
    return format("%lld", n);
}
static inline std::string vtos(unsigned long long n) {
    return format("%llu", n);
}
static inline std::string vtos(int n) {
    return vtos((long long)n);
}
static inline std::string vtos(long n) {
    return vtos((long long)n);
}
static inline std::string vtos(unsigned int n) {
    return vtos((unsigned long long)n);
}
static inline std::string vtos(unsigned long n) {
    return vtos((unsigned long long)n);
}
static inline std::string vtos(const std::string& s) {
    return s;
}
static inline std::string vtos(const char* s) {
    return std::string(s);
}

template <typename T>
static inline std::string toString(const T& t) {
    return vtos(t);
}

// A bound as range messages show it: 10^9, 2*10^9, -10^18, or its digits.
static inline std::string toHumanReadableString(long long n) {
    std::string digits = vtos(n);
    std::string sign = n < 0 ? "-" : "";
    if (n < 0) digits = digits.substr(1);
    size_t zeros = 0;
    while (zeros < digits.size() && digits[digits.size() - 1 - zeros] == '0') zeros++;
    if (zeros < 7 || zeros == digits.size()) return sign + digits;
    std::string head = digits.substr(0, digits.size() - zeros);
    std::string power = "10^" + vtos((long long)zeros);
    return sign + (head == "1" ? power : head + "*" + power);
}
static inline std::string toHumanReadableString(unsigned long long n) {
    if (n <= (unsigned long long)LLONG_MAX) return toHumanReadableString((long long)n);
    return vtos(n);
}
static inline std::string toHumanReadableString(int n) {
    return toHumanReadableString((long long)n);
}
static inline std::string toHumanReadableString(double n) {
    return vtos(n);
}

// Equal within an absolute error, or a relative one against the expected value only.
static inline bool doubleCompare(double expected, double result, double MAX_DOUBLE_ERROR) {
    const double error = MAX_DOUBLE_ERROR + 1E-15;
    if (std::isnan(expected)) return std::isnan(result);
    if (std::fabs(expected) > 1E300) {
        if (expected > 0) return result > 1E300;
        return result < -1E300;
    }
    if (std::isnan(result) || std::fabs(result) > 1E300) return false;
    if (std::fabs(result - expected) <= error) return true;
    double low = std::min(expected * (1.0 - error), expected * (1.0 + error));
    double high = std::max(expected * (1.0 - error), expected * (1.0 + error));
    return low <= result && result <= high;
}

// testlib's absolute value and minimum, kept for what checkers print: 0.0 gives -0.0 (an error
// shown as "-0.00000"), and the minimum of a NaN and a number is the number.
static inline double testlibAbs_(double x) { return x > 0 ? x : -x; }

static inline double doubleDelta(double expected, double result) {
    double absolute = testlibAbs_(result - expected);
    if (testlibAbs_(expected) > 1E-9) {
        double relative = testlibAbs_(absolute / expected);
        return absolute < relative ? absolute : relative;
    }
    return absolute;
}

static inline std::vector<std::string> split(const std::string& s, char separator) {
    std::vector<std::string> parts(1);
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == separator)
            parts.push_back(std::string());
        else
            parts.back() += s[i];
    }
    return parts;
}

static inline std::vector<std::string> tokenize(const std::string& s, char separator) {
    std::vector<std::string> parts;
    std::vector<std::string> all = split(s, separator);
    for (size_t i = 0; i < all.size(); i++)
        if (!all[i].empty()) parts.push_back(all[i]);
    return parts;
}

template <typename It>
static inline std::string join(It begin, It end, char separator = ' ') {
    std::string joined;
    for (It it = begin; it != end; ++it) {
        if (it != begin) joined += separator;
        joined += vtos(*it);
    }
    return joined;
}

template <typename C>
static inline std::string join(const C& items, char separator = ' ') {
    return join(items.begin(), items.end(), separator);
}

// -- the state of the run -------------------------------------------------------------------

struct a2e_testlib_run_ {
    int testCase = -1;  // setTestCase's, or -1: none (messages then name no test case)
    std::string testset;  // --testset and --group, what validator.testset() and group() say
    std::string group;
    bool validatorArguments = false;  // registerValidation(argc, argv)
    bool registered = false;
    bool checker = false;
    bool interactor = false;
    bool validator = false;
    bool readToEof = false;  // a validator's inf.readEof() passed
    bool quitted = false;
    std::string name;
    std::string resultFile;
};

static a2e_testlib_run_ a2e_testlib_run;

// Where a message's parenthesis, testlib's, stands while the message is being made: what is
// added later (the test case, the file, the line) goes inside it, "(test case 2, stdin, line 5)".
const char A2E_OPEN_ = char(11);
const char A2E_CLOSE_ = char(17);

static inline bool a2e_bracketed_(const std::string& message, size_t& open, size_t& close) {
    size_t opens = 0, closes = 0;
    for (size_t i = 0; i < message.size(); i++) {
        if (message[i] == A2E_OPEN_) open = i, opens++;
        if (message[i] == A2E_CLOSE_) close = i, closes++;
    }
    return opens == 1 && closes == 1 && open < close;
}

// ``extra`` added to the message's parenthesis (once), or a parenthesis of its own made.
static inline std::string a2e_append_(const std::string& message, const std::string& extra) {
    size_t open = 0, close = 0;
    if (!a2e_bracketed_(message, open, close))
        return message + " " + A2E_OPEN_ + extra + A2E_CLOSE_;
    size_t found = message.find(extra, open);
    if (found != std::string::npos && found < close) return message;
    std::string result = message;
    result.insert(close, ", " + extra);
    return result;
}

// The message as it is printed: its parenthesis, if it has one, in plain characters.
static inline std::string a2e_printable_(const std::string& message) {
    size_t open = 0, close = 0;
    if (!a2e_bracketed_(message, open, close)) return message;
    std::string result = message;
    result[open] = '(';
    result[close] = ')';
    return result;
}

// A multi-test input's or output's current test case, named in every message from here on
// (numbered from 1: a first call with 0 numbers them from 0 + 1).
static inline void setTestCase(int testCase) {
    static bool first = true;
    static bool zeroBased = false;
    if (first && testCase == 0) zeroBased = true;
    first = false;
    a2e_testlib_run.testCase = zeroBased ? testCase + 1 : testCase;
}

static inline void unsetTestCase() { a2e_testlib_run.testCase = -1; }

// -- patterns -------------------------------------------------------------------------------

class random_t;

// testlib's pattern, as validators and checkers use it ("[a-z]{1,10}", "0|-?[1-9][0-9]*"):
// alternatives at the top-level '|', a pattern wholly in parentheses its inside, else one
// character or [set] with its count ({n}, {n,m}, ?, *, +) followed by the rest; spaces are
// ignored unless escaped. Matching is testlib's greedy one, kept because verdicts depend on
// it: a set takes as many characters as its count allows and never gives one back ("[0-9]?1"
// does not match "1"), and each alternative is tried in turn.
class pattern {
public:
    pattern(std::string s);
    std::string next(random_t& rnd) const;
    bool matches(const std::string& s) const { return matchesFrom_(s, 0); }
    std::string src() const { return src_; }

private:
    std::string src_;
    std::vector<pattern> children_;
    std::vector<char> chars_;  // sorted
    int from_ = 0;
    int to_ = 0;

    bool matchesFrom_(const std::string& s, size_t pos) const;
};

static inline void setName(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    a2e_testlib_run.name = vformat_(fmt, args);
    va_end(args);
}

struct InStream;
extern InStream inf;
extern InStream ouf;
extern InStream ans;
NORETURN static inline void a2e_testlib_exit(TResult result, std::string message);

// -- streams --------------------------------------------------------------------------------

struct InStream {
    std::string name;
    TMode mode;
    bool strict = false;
    bool opened = false;
    int maxMessageLength = 32000;
    size_t maxTokenLength = A2E_TESTLIB_MAX_TOKEN;

    InStream() : name("unopened stream"), mode(_input) {}

    // A stream over text: what a checker re-reads (a line it read, say).
    InStream(const InStream& base, const std::string& content)
        : name("based on " + base.name),
          mode(base.mode),
          strict(base.strict),
          opened(true),
          buffer_(content) {}

    void openFile(const std::string& path, TMode as) {
        name = path;
        mode = as;
        std::ifstream file(path.c_str(), std::ios::in | std::ios::binary);
        opened = bool(file);
        if (opened) {
            std::ostringstream all;
            all << file.rdbuf();
            buffer_ = all.str();
        }
        position_ = 0;
        file_ = NULL;
    }

    // The participant's output in an interaction: read a character at a time as it comes, so
    // that no read waits for more than the next character.
    void openStdin(TMode as) {
        name = "stdin";
        mode = as;
        opened = true;
        file_ = stdin;
    }

    void skipBom() {
        if (!file_ && buffer_.compare(0, 3, "\xEF\xBB\xBF") == 0 && position_ == 0) position_ = 3;
    }

    // -- characters --

    int peek_() {
        if (file_) {
            if (peeked_ == -2) peeked_ = getc(file_);
            return peeked_ == EOF ? -1 : peeked_;
        }
        return position_ < buffer_.size() ? (unsigned char)buffer_[position_] : -1;
    }

    int take_() {
        int c = peek_();
        if (c == -1) return -1;
        if (file_)
            peeked_ = -2;
        else
            position_++;
        return c;
    }

    char curChar() {
        int c = peek_();
        return c == -1 ? EOFC : (char)c;
    }

    char nextChar() {
        int c = take_();
        return c == -1 ? EOFC : (char)c;
    }

    char readChar() { return nextChar(); }

    void skipChar() { take_(); }

    void unreadChar(char c) {
        if (file_) {
            if (peeked_ != -2) ungetc(peeked_, file_);
            peeked_ = (unsigned char)c;
        } else if (position_ > 0) {
            position_--;
        }
    }

    // The next character, which must be ``expected``: anything else, the end of the file
    // included (read as char(-1), as testlib reads it), is PE.
    char readChar(char expected) {
        mark_();
        char found = nextChar();
        if (found == expected) return found;
        std::string shown =
            (found == LF || found == CR) ? format("#%d", (int)found) : format("'%c'", found);
        quit(_pe,
             "Unexpected character " + shown + ", but '" + std::string(1, expected) + "' expected");
    }

    char readSpace() { return readChar(SPACE); }

    // -- ends --

    bool eof() { return peek_() == -1; }

    void skipBlanks() {
        while (peek_() != -1 && isBlanks((char)peek_())) take_();
    }

    bool seekEof() {
        if (!opened) return true;
        skipBlanks();
        return eof();
    }

    bool eoln() {
        int c = peek_();
        if (strict) {
            if (c != LF) return false;
            take_();
            return true;
        }
        if (c == -1) return true;
        if (c == LF) {
            take_();
            return true;
        }
        if (c == CR) {
            take_();
            if (peek_() == LF) {
                take_();
                return true;
            }
            unreadChar(CR);
            return false;
        }
        return false;
    }

    bool seekEoln() {
        while (peek_() == SPACE || peek_() == TAB) take_();
        return eoln();
    }

    void nextLine() { readLine(); }

    void readEoln() {
        mark_();
        if (!eoln()) quit(_pe, "Expected EOLN");
    }

    void readEof() {
        mark_();
        if (!eof()) quit(_pe, "Expected EOF");
        if (this == &inf) a2e_testlib_run.readToEof = true;
    }

    // -- tokens --

    void readWordTo(std::string& token) {
        if (!strict) skipBlanks();
        mark_();
        int c = peek_();
        if (c == -1) quit(_unexpected_eof, "Unexpected end of file - token expected");
        if (isBlanks((char)c)) quit(_pe, "Unexpected white-space - token expected");
        token.clear();
        while ((c = peek_()) != -1 && !isBlanks((char)c)) {
            token += (char)take_();
            if (token.size() > maxTokenLength)
                quit(_pe, format("Length of token exceeds %d, token is '%s...'",
                                 (int)maxTokenLength, compress(token).c_str()));
        }
    }

    void readTokenTo(std::string& token) { readWordTo(token); }

    std::string readWord() {
        std::string token;
        readWordTo(token);
        return token;
    }

    std::string readToken() { return readWord(); }

    std::vector<std::string> readWords(int size, int indexBase = 1) {
        (void)indexBase;
        return readMany_<std::string>(size, "readWords", true, [&](int) { return readWord(); });
    }

    std::vector<std::string> readTokens(int size, int indexBase = 1) {
        return readWords(size, indexBase);
    }

    // A token that must match a pattern: WA (FAIL on the jury's files) where it does not.
    std::string readWord(const pattern& p, const std::string& variableName = "") {
        std::string token = readWord();
        matched_(token, p, "Token", variableName, -1);
        return token;
    }
    std::string readWord(const std::string& ptrn, const std::string& variableName = "") {
        return readWord(pattern(ptrn), variableName);
    }
    std::string readToken(const pattern& p, const std::string& variableName = "") {
        return readWord(p, variableName);
    }
    std::string readToken(const std::string& ptrn, const std::string& variableName = "") {
        return readWord(pattern(ptrn), variableName);
    }
    void readWordTo(std::string& token, const pattern& p, const std::string& variableName = "") {
        readWordTo(token);
        matched_(token, p, "Token", variableName, -1);
    }
    void readWordTo(std::string& token, const std::string& ptrn,
                    const std::string& variableName = "") {
        readWordTo(token, pattern(ptrn), variableName);
    }
    void readTokenTo(std::string& token, const pattern& p, const std::string& variableName = "") {
        readWordTo(token, p, variableName);
    }
    void readTokenTo(std::string& token, const std::string& ptrn,
                     const std::string& variableName = "") {
        readWordTo(token, pattern(ptrn), variableName);
    }
    std::vector<std::string> readWords(int size, const pattern& p,
                                       const std::string& variablesName = "", int indexBase = 1) {
        return readMany_<std::string>(size, "readWords", true, [&](int i) {
            std::string token = readWord();
            matched_(token, p, "Token", variablesName, i + indexBase);
            return token;
        });
    }
    std::vector<std::string> readWords(int size, const std::string& ptrn,
                                       const std::string& variablesName = "", int indexBase = 1) {
        return readWords(size, pattern(ptrn), variablesName, indexBase);
    }
    std::vector<std::string> readTokens(int size, const pattern& p,
                                        const std::string& variablesName = "", int indexBase = 1) {
        return readWords(size, p, variablesName, indexBase);
    }
    std::vector<std::string> readTokens(int size, const std::string& ptrn,
                                        const std::string& variablesName = "", int indexBase = 1) {
        return readWords(size, pattern(ptrn), variablesName, indexBase);
    }

    // -- integers --

    // A token as a number, as testlib's stringToLongLong, stringToUnsignedLongLong and
    // stringToDouble read one: a token holding a NUL is refused first, saying so.
    long long longOf(const std::string& token) {
        refuseNul_(token, "integer");
        long long value;
        if (!parseLong_(token, value))
            quit(_pe, "Expected integer, but \"" + compress(token) + "\" found");
        return value;
    }

    unsigned long long unsignedOf(const std::string& token) {
        refuseNul_(token, "unsigned integer");
        unsigned long long value;
        if (!parseUnsigned_(token, value))
            quit(_pe, "Expected unsigned integer, but \"" + compress(token) + "\" found");
        return value;
    }

    double doubleOf(const std::string& token) {
        refuseNul_(token, "double");
        double value;
        if (!parseDouble_(token, value))
            quit(_pe, "Expected double, but \"" + compress(token) + "\" found");
        return value;
    }

    long long readLong() {
        if (!strict && seekEof()) quit(_unexpected_eof, "Unexpected end of file - int64 expected");
        return longOf(readWord());
    }

    long long readLong(long long minv, long long maxv, const std::string& variableName = "") {
        long long value = readLong();
        if (value < minv || value > maxv)
            rangeError_("Integer", vtos(value), toHumanReadableString(minv),
                        toHumanReadableString(maxv), variableName);
        return value;
    }

    unsigned long long readUnsignedLong() {
        if (!strict && seekEof()) quit(_unexpected_eof, "Unexpected end of file - int64 expected");
        return unsignedOf(readWord());
    }

    unsigned long long readUnsignedLong(unsigned long long minv, unsigned long long maxv,
                                        const std::string& variableName = "") {
        unsigned long long value = readUnsignedLong();
        if (value < minv || value > maxv)
            rangeError_("Unsigned integer", vtos(value), toHumanReadableString(minv),
                        toHumanReadableString(maxv), variableName);
        return value;
    }

    int readInt() {
        if (!strict && seekEof()) quit(_unexpected_eof, "Unexpected end of file - int32 expected");
        std::string token = readWord();
        long long value = longOf(token);
        if (value < INT_MIN || value > INT_MAX)
            quit(_pe, "Expected int32, but \"" + compress(token) + "\" found");
        return (int)value;
    }

    int readInt(int minv, int maxv, const std::string& variableName = "") {
        int value = readInt();
        if (value < minv || value > maxv)
            rangeError_("Integer", vtos(value), toHumanReadableString(minv),
                        toHumanReadableString(maxv), variableName);
        return value;
    }

    int readInteger() { return readInt(); }
    int readInteger(int minv, int maxv, const std::string& variableName = "") {
        return readInt(minv, maxv, variableName);
    }

    std::vector<int> readInts(int size, int minv, int maxv, const std::string& variablesName = "",
                              int indexBase = 1) {
        return readMany_<int>(size, "readInts", true, [&](int i) {
            int value = readInt();
            if (value < minv || value > maxv)
                elementError_("Integer", vtos(value), toHumanReadableString(minv),
                              toHumanReadableString(maxv), variablesName, i + indexBase);
            return value;
        });
    }

    std::vector<int> readInts(int size, int indexBase = 1) {
        return readInts(size, INT_MIN, INT_MAX, "", indexBase);
    }

    std::vector<int> readIntegers(int size, int minv, int maxv,
                                  const std::string& variablesName = "", int indexBase = 1) {
        return readInts(size, minv, maxv, variablesName, indexBase);
    }

    std::vector<long long> readLongs(int size, long long minv, long long maxv,
                                     const std::string& variablesName = "", int indexBase = 1) {
        return readMany_<long long>(size, "readLongs", true, [&](int i) {
            long long value = readLong();
            if (value < minv || value > maxv)
                elementError_("Integer", vtos(value), toHumanReadableString(minv),
                              toHumanReadableString(maxv), variablesName, i + indexBase);
            return value;
        });
    }

    std::vector<long long> readLongs(int size, int indexBase = 1) {
        return readLongs(size, LLONG_MIN, LLONG_MAX, "", indexBase);
    }

    // -- reals --

    double readDouble() {
        if (!strict && seekEof()) quit(_unexpected_eof, "Unexpected end of file - double expected");
        return doubleOf(readWord());
    }

    double readDouble(double minv, double maxv, const std::string& variableName = "") {
        double value = readDouble();
        if (value < minv || value > maxv)
            rangeError_("Double", vtos(value), vtos(minv), vtos(maxv), variableName);
        return value;
    }

    double readReal() { return readDouble(); }
    double readReal(double minv, double maxv, const std::string& variableName = "") {
        return readDouble(minv, maxv, variableName);
    }

    std::vector<double> readDoubles(int size, double minv, double maxv,
                                    const std::string& variablesName = "", int indexBase = 1) {
        return readMany_<double>(size, "readDoubles", true, [&](int i) {
            double value = readDouble();
            if (value < minv || value > maxv)
                elementError_("Double", vtos(value), vtos(minv), vtos(maxv), variablesName,
                              i + indexBase);
            return value;
        });
    }

    std::vector<double> readReals(int size, double minv, double maxv,
                                  const std::string& variablesName = "", int indexBase = 1) {
        return readDoubles(size, minv, maxv, variablesName, indexBase);
    }

    double readStrictDouble(double minv, double maxv, int minAfterPointDigitCount,
                            int maxAfterPointDigitCount, const std::string& variableName = "") {
        if (!strict && seekEof())
            quit(_unexpected_eof, "Unexpected end of file - strict double expected");
        double value = strictDoubleOf(readWord(), minAfterPointDigitCount, maxAfterPointDigitCount);
        if (value < minv || value > maxv)
            rangeError_("Strict double", vtos(value), vtos(minv), vtos(maxv), variableName);
        return value;
    }

    // A token as a number with digits after its point in a range, as testlib's
    // stringToStrictDouble reads one, its checks in testlib's order (the first that fails
    // gives the message): a NUL; the jury's counts; the token's shape (a sign or digit first,
    // one point inside it, a digit last); the digits after the point; then where the first
    // digit is and a leading zero.
    double strictDoubleOf(const std::string& token, int minAfterPointDigitCount,
                          int maxAfterPointDigitCount) {
        refuseNul_(token, "double");
        if (minAfterPointDigitCount < 0)
            quit(_fail, "stringToStrictDouble: minAfterPointDigitCount should be non-negative.");
        if (minAfterPointDigitCount > maxAfterPointDigitCount)
            quit(_fail, "stringToStrictDouble: minAfterPointDigitCount should be less or equal to "
                        "maxAfterPointDigitCount.");
        const std::string malformed = "Expected strict double, but \"" + compress(token) + "\" found";
        size_t length = token.size();
        if (length == 0 || length > 1000) quit(_pe, malformed);
        if (token[0] != '-' && !isDigit_(token[0])) quit(_pe, malformed);
        size_t point = std::string::npos;
        for (size_t i = 1; i + 1 < length; i++) {
            bool isPoint = token[i] == '.';
            if (isPoint && point != std::string::npos) quit(_pe, malformed);
            if (isPoint) point = i;
            if (!isPoint && !isDigit_(token[i])) quit(_pe, malformed);
        }
        if (!isDigit_(token[length - 1])) quit(_pe, malformed);
        int after = point == std::string::npos ? 0 : (int)(length - point - 1);
        if (after < minAfterPointDigitCount || after > maxAfterPointDigitCount)
            quit(_pe,
                 format("Expected strict double with number of digits after point in range "
                        "[%d,%d], but \"%s\" found",
                        minAfterPointDigitCount, maxAfterPointDigitCount, compress(token).c_str()));
        size_t first = token.find_first_of("0123456789");
        if (first == std::string::npos || first > 1) quit(_pe, malformed);
        if (token[first] == '0' && first + 1 < length && isDigit_(token[first + 1]))
            quit(_pe, malformed);
        double value;
        if (!parseDouble_(token, value) || std::fabs(value) > 1E300)  // testlib: "infinite"
            quit(_pe, "Expected double, but \"" + compress(token) + "\" found");
        if (token[0] == '-' && value >= 0)
            quit(_pe, "Redundant minus in \"" + compress(token) + "\" found");
        return value;
    }

    static bool isDigit_(char c) { return c >= '0' && c <= '9'; }

    double readStrictReal(double minv, double maxv, int minAfter, int maxAfter,
                          const std::string& variableName = "") {
        return readStrictDouble(minv, maxv, minAfter, maxAfter, variableName);
    }

    // -- lines --

    // A line as testlib reads one: a CR before its LF ends it; any other CR is dropped and the
    // character after it kept whatever it is (a second CR, or EOF as char(-1): "3\r" at the
    // end of a file reads as "3\xff", which no answer equals).
    void readLineTo(std::string& line) {
        line.clear();
        int c;
        while ((c = peek_()) != -1 && c != LF) {
            if (line.size() >= A2E_TESTLIB_MAX_LINE) quit(_pe, "Line is too long");
            if (c == CR) {
                take_();
                if (peek_() == LF) {
                    unreadChar(CR);
                    break;
                }
            }
            mark_();
            c = take_();
            line += c == -1 ? EOFC : (char)c;
            if (c == -1) break;
        }
        if (strict)
            readEoln();
        else
            eoln();
    }

    void readStringTo(std::string& line) { readLineTo(line); }

    std::string readLine() {
        std::string line;
        readLineTo(line);
        return line;
    }

    std::string readString() { return readLine(); }

    // A line that must match a pattern: WA (FAIL on the jury's files) where it does not.
    void readLineTo(std::string& line, const pattern& p, const std::string& variableName = "") {
        readLineTo(line);
        matched_(line, p, "Line", variableName, -1);
    }
    void readLineTo(std::string& line, const std::string& ptrn,
                    const std::string& variableName = "") {
        readLineTo(line, pattern(ptrn), variableName);
    }
    void readStringTo(std::string& line, const pattern& p, const std::string& variableName = "") {
        readLineTo(line, p, variableName);
    }
    void readStringTo(std::string& line, const std::string& ptrn,
                      const std::string& variableName = "") {
        readLineTo(line, pattern(ptrn), variableName);
    }
    std::string readLine(const pattern& p, const std::string& variableName = "") {
        std::string line;
        readLineTo(line, p, variableName);
        return line;
    }
    std::string readLine(const std::string& ptrn, const std::string& variableName = "") {
        return readLine(pattern(ptrn), variableName);
    }
    std::string readString(const pattern& p, const std::string& variableName = "") {
        return readLine(p, variableName);
    }
    std::string readString(const std::string& ptrn, const std::string& variableName = "") {
        return readLine(pattern(ptrn), variableName);
    }
    std::vector<std::string> readLines(int size, const pattern& p,
                                       const std::string& variablesName = "", int indexBase = 1) {
        return readMany_<std::string>(size, "readLines", false, [&](int i) {
            std::string line = readLine();
            matched_(line, p, "Line", variablesName, i + indexBase);
            return line;
        });
    }
    std::vector<std::string> readLines(int size, const std::string& ptrn,
                                       const std::string& variablesName = "", int indexBase = 1) {
        return readLines(size, pattern(ptrn), variablesName, indexBase);
    }
    std::vector<std::string> readStrings(int size, const pattern& p,
                                         const std::string& variablesName = "", int indexBase = 1) {
        return readLines(size, p, variablesName, indexBase);
    }
    std::vector<std::string> readStrings(int size, const std::string& ptrn,
                                         const std::string& variablesName = "", int indexBase = 1) {
        return readLines(size, pattern(ptrn), variablesName, indexBase);
    }

    std::vector<std::string> readLines(int size, int indexBase = 1) {
        (void)indexBase;
        return readMany_<std::string>(size, "readLines", false, [&](int) { return readLine(); });
    }

    std::vector<std::string> readStrings(int size, int indexBase = 1) {
        return readLines(size, indexBase);
    }

    // -- verdicts --

    NORETURN void quit(TResult result, const char* msg) { quit(result, std::string(msg)); }

    NORETURN void quit(TResult result, const std::string& msg) {
        std::string message = trim(msg);
        int testCase = a2e_testlib_run.testCase;
        if (testCase >= 0 && result != _ok && result != _points)
            message = a2e_append_(message, "test case " + vtos(testCase));
        else if (testCase >= 0)
            message = a2e_append_(message, vtos(testCase) + (testCase == 1 ? " test case" : " test cases"));
        if ((int)message.size() > maxMessageLength) {
            std::string note =
                format("message length exceeds %d, the message is truncated: ", maxMessageLength);
            message = note + message.substr(0, maxMessageLength - note.size());
        }
        if (mode != _output && result != _fail) {
            result = _fail;
            message = a2e_append_(message, name);
            int line = lastLine_();
            if (mode == _input && a2e_testlib_run.validator && line != -1)
                message = a2e_append_(message, "line " + vtos(line));
        }
        a2e_testlib_exit(result, a2e_printable_(message));
    }

#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    NORETURN void
    quitf(TResult result, const char* fmt, ...) {
        va_list args;
        va_start(args, fmt);
        std::string message = vformat_(fmt, args);
        va_end(args);
        quit(result, message);
    }

    void quitif(bool condition, TResult result, const char* fmt, ...) {
        if (!condition) return;
        va_list args;
        va_start(args, fmt);
        std::string message = vformat_(fmt, args);
        va_end(args);
        quit(result, message);
    }

    NORETURN void quits(TResult result, const std::string& msg) { quit(result, msg); }

    void ensuref(bool condition, const char* fmt, ...) {
        if (condition) return;
        va_list args;
        va_start(args, fmt);
        std::string message = vformat_(fmt, args);
        va_end(args);
        quit(_wa, message);
    }

    void close() {}

private:
    std::string buffer_;
    size_t position_ = 0;
    FILE* file_ = NULL;
    int peeked_ = -2;
    // Where the token, line or line end read last began (testlib's lastLine), or -1.
    long lastAt_ = -1;

    void mark_() {
        if (!file_) lastAt_ = (long)position_;
    }

    // The line (from 1) of what was read last, for a validator's messages; -1: nothing yet.
    int lastLine_() const {
        if (lastAt_ < 0) return -1;
        return 1 + (int)std::count(buffer_.begin(), buffer_.begin() + lastAt_, LF);
    }

    // A number's token holding a NUL: PE (FAIL on the jury's files), as testlib says it.
    void refuseNul_(const std::string& token, const char* expected) {
        if (token.find('\0') != std::string::npos)
            quit(_pe, format("Expected %s, but \"%s\" found (it contains \\0)", expected,
                             compress(token).c_str()));
    }

    // ``size`` items read by ``read(index)``; in strict mode one space between two (not lines).
    template <typename T, typename Read>
    std::vector<T> readMany_(int size, const char* what, bool spaced, Read read) {
        if (size < 0) quit(_fail, format("%s: size should be non-negative.", what));
        if (size > 100000000) quit(_fail, format("%s: size should be at most 100000000.", what));
        std::vector<T> items;
        for (int i = 0; i < size; i++) {
            if (strict && spaced && i > 0) readSpace();
            items.push_back(read(i));
        }
        return items;
    }

    NORETURN void rangeError_(const std::string& kind, const std::string& value,
                              const std::string& minv, const std::string& maxv,
                              const std::string& variableName) {
        std::string range = "[" + minv + ", " + maxv + "]";
        if (variableName.empty()) quit(_wa, kind + " " + value + " violates the range " + range);
        quit(_wa, kind + " parameter [name=" + variableName + "] equals to " + value +
                      ", violates the range " + range);
    }

    // ``value`` (a "Token" or a "Line", the ``index``th of many, or -1) against ``p``, as
    // testlib words a mismatch.
    void matched_(const std::string& value, const pattern& p, const std::string& what,
                  const std::string& name, int index) {
        if (p.matches(value)) return;
        std::string shown = "\"" + compress(value) + "\"";
        std::string against = "correspond to pattern \"" + p.src() + "\"";
        if (index < 0 && name.empty()) quit(_wa, what + " " + shown + " doesn't " + against);
        if (index < 0)
            quit(_wa, what + (what == "Token" ? " parameter" : "") + " [name=" + name +
                          "] equals to " + shown + ", doesn't " + against);
        if (name.empty())
            quit(_wa, what + " element [index=" + vtos(index) + "] equals to " + shown +
                          " doesn't " + against);
        quit(_wa, what + " element " + name + "[" + vtos(index) + "] equals to " + shown +
                      ", doesn't " + against);
    }

    NORETURN void elementError_(const std::string& kind, const std::string& value,
                                const std::string& minv, const std::string& maxv,
                                const std::string& variablesName, int index) {
        std::string range = "[" + minv + ", " + maxv + "]";
        if (variablesName.empty())
            quit(_wa, kind + " element [index=" + vtos(index) + "] equals to " + value +
                          ", violates the range " + range);
        quit(_wa, kind + " element " + variablesName + "[" + vtos(index) + "] equals to " + value +
                      ", violates the range " + range);
    }

    // -?digits, no '+', no leading zero but "0" itself, within 64 bits.
    static bool parseLong_(const std::string& token, long long& value) {
        if (token.empty() || token.size() > 20) return false;
        bool minus = token[0] == '-' && token.size() > 1;
        std::string digits = minus ? token.substr(1) : token;
        if (digits.find_first_not_of("0123456789") != std::string::npos || digits.empty())
            return false;
        if (digits[0] == '0' && (digits.size() > 1 || minus)) return false;
        unsigned long long magnitude = 0;
        for (size_t i = 0; i < digits.size(); i++) {
            unsigned long long digit = (unsigned long long)(digits[i] - '0');
            if (magnitude > (ULLONG_MAX - digit) / 10) return false;
            magnitude = magnitude * 10 + digit;
        }
        if (minus) {
            if (magnitude > (unsigned long long)LLONG_MAX + 1ULL) return false;
            value = magnitude == (unsigned long long)LLONG_MAX + 1ULL ? LLONG_MIN
                                                                      : -(long long)magnitude;
        } else {
            if (magnitude > (unsigned long long)LLONG_MAX) return false;
            value = (long long)magnitude;
        }
        return true;
    }

    static bool parseUnsigned_(const std::string& token, unsigned long long& value) {
        if (token.empty() || token.size() > 20) return false;
        if (token.find_first_not_of("0123456789") != std::string::npos) return false;
        if (token[0] == '0' && token.size() > 1) return false;
        unsigned long long magnitude = 0;
        for (size_t i = 0; i < token.size(); i++) {
            unsigned long long digit = (unsigned long long)(token[i] - '0');
            if (magnitude > (ULLONG_MAX - digit) / 10) return false;
            magnitude = magnitude * 10 + digit;
        }
        value = magnitude;
        return true;
    }

    // Digits, '.', 'e', 'E', '+', '-' only, then the C library's reading of all of it.
    static bool parseDouble_(const std::string& token, double& value) {
        int minuses = 0, pluses = 0, points = 0, exponents = 0, digits = 0;
        for (size_t i = 0; i < token.size(); i++) {
            char c = token[i];
            if ('0' <= c && c <= '9')
                digits++;
            else if (c == '-')
                minuses++;
            else if (c == '+')
                pluses++;
            else if (c == '.')
                points++;
            else if (c == 'e' || c == 'E')
                exponents++;
            else
                return false;
        }
        if (digits == 0 || minuses > 2 || pluses > 2 || points > 1 || exponents > 1) return false;
        int used = 0;
        if (sscanf(token.c_str(), "%lf%n", &value, &used) != 1 || used != (int)token.size())
            return false;
        return !std::isnan(value);
    }
};

// testlib's readings of a token as a number, for checkers that read tokens first.
static inline long long stringToLongLong(InStream& in, const std::string& buffer) {
    return in.longOf(buffer);
}
static inline unsigned long long stringToUnsignedLongLong(InStream& in, const std::string& buffer) {
    return in.unsignedOf(buffer);
}
static inline double stringToDouble(InStream& in, const std::string& buffer) {
    return in.doubleOf(buffer);
}
static inline double stringToStrictDouble(InStream& in, const std::string& buffer,
                                          int minAfterPointDigitCount, int maxAfterPointDigitCount) {
    return in.strictDoubleOf(buffer, minAfterPointDigitCount, maxAfterPointDigitCount);
}

InStream inf;
InStream ouf;
InStream ans;
std::fstream tout;

// -- ending ---------------------------------------------------------------------------------

static inline int a2e_testlib_exit_code(TResult result) {
    switch (result) {
        case _ok:
            return OK_EXIT_CODE;
        case _wa:
            return WA_EXIT_CODE;
        case _pe:
            return PE_EXIT_CODE;
        case _fail:
            return FAIL_EXIT_CODE;
        case _dirt:
            return DIRT_EXIT_CODE;
        case _points:
            return POINTS_EXIT_CODE;
        case _unexpected_eof:
            return UNEXPECTED_EOF_EXIT_CODE;
        default:
            if (result >= _partially) return PC_BASE_EXIT_CODE + (result - _partially);
            return FAIL_EXIT_CODE;
    }
}

static inline std::string a2e_testlib_prefix(TResult result) {
    switch (result) {
        case _ok:
            return "ok ";
        case _wa:
            return "wrong answer ";
        case _pe:
            return "wrong output format ";
        case _fail:
            return "FAIL ";
        case _dirt:
            return "wrong output format ";
        case _points:
            return "points ";
        case _unexpected_eof:
            return "unexpected eof ";
        default:
            if (result >= _partially) return format("partially correct (%d) ", result - _partially);
            return "FAIL ";
    }
}

NORETURN static inline void a2e_testlib_exit(TResult result, std::string message) {
    a2e_testlib_run.quitted = true;
#ifndef ENABLE_UNEXPECTED_EOF
    if (result == _unexpected_eof) result = _pe;
#endif
    bool accepting = result == _ok || result == _points || result >= _partially;
    if (accepting && a2e_testlib_run.checker && !a2e_testlib_run.interactor && !ouf.seekEof()) {
        result = _dirt;
        message = "Extra information in the output file";
    }
    if (result == _dirt) {
        result = _pe;
    }
    if (!a2e_testlib_run.resultFile.empty()) {
        FILE* file = fopen(a2e_testlib_run.resultFile.c_str(), "w");
        if (file) {
            fputs(message.c_str(), file);
            fclose(file);
        }
        fputs("\nSee file to check exit message\n", stderr);
    } else {
        fputs((a2e_testlib_prefix(result) + message + "\n").c_str(), stderr);
    }
    fflush(stderr);
    if (tout.is_open()) tout.close();
    std::fflush(stdout);
    std::exit(a2e_testlib_exit_code(result));
}

// A checker that ends without a verdict has judged nothing: that is the checker's failure.
struct a2e_testlib_guard_ {
    ~a2e_testlib_guard_() {
        if (a2e_testlib_run.quitted) return;
        const char* why = NULL;
        if (!a2e_testlib_run.registered)
            why =
                "Call register-function in the first line of the main (registerTestlibCmd or other "
                "similar)";
        else if (a2e_testlib_run.checker && !a2e_testlib_run.interactor)
            why = "Checker must end with quit or quitf call.";
        else if (a2e_testlib_run.validator && !a2e_testlib_run.readToEof)
            why = "Validator must end with readEof call.";
        if (!why) return;
        fprintf(stderr, "FAIL %s\n", why);
        fflush(stderr);
        fflush(stdout);
        _exit(FAIL_EXIT_CODE);
    }
};

static a2e_testlib_guard_ a2e_testlib_guard;

// -- verdicts -------------------------------------------------------------------------------

NORETURN static inline void quit(TResult result, const std::string& msg) {
    ouf.quit(result, msg);
}
NORETURN static inline void quit(TResult result, const char* msg) {
    ouf.quit(result, msg);
}

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
NORETURN static inline void
quitf(TResult result, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string message = vformat_(fmt, args);
    va_end(args);
    ouf.quit(result, message);
}

// A character of a pattern that is a command (not escaped by an odd run of backslashes).
static inline bool a2e_pattern_command_(const std::string& s, size_t pos, char value) {
    if (pos >= s.size()) return false;
    size_t slashes = 0;
    for (size_t before = pos; before > 0 && s[before - 1] == '\\'; before--) slashes++;
    return slashes % 2 == 0 && s[pos] == value;
}

// The character at ``pos`` (the one after a backslash, escaped), ``pos`` moved past it.
static inline char a2e_pattern_char_(const std::string& s, size_t& pos) {
    pos += s[pos] == '\\' ? 2 : 1;
    return pos - 1 < s.size() ? s[pos - 1] : '\0';
}

NORETURN static inline void a2e_pattern_illegal_(const std::string& s) {
    quit(_fail, "pattern: Illegal pattern (or part) \"" + s + "\"");
}

// A count after a set: {n} or {n,m} (read as %d reads them), ?, *, +, or once.
static inline void a2e_pattern_counts_(const std::string& s, size_t& pos, int& from, int& to) {
    from = to = 1;
    if (pos >= s.size()) return;
    if (a2e_pattern_command_(s, pos, '{')) {
        std::vector<std::string> parts;
        std::string part;
        pos++;
        while (pos < s.size() && !a2e_pattern_command_(s, pos, '}')) {
            if (a2e_pattern_command_(s, pos, ',')) {
                parts.push_back(part);
                part.clear();
                pos++;
            } else {
                part += a2e_pattern_char_(s, pos);
            }
        }
        if (!part.empty()) parts.push_back(part);
        if (!a2e_pattern_command_(s, pos, '}')) a2e_pattern_illegal_(s);
        pos++;
        if (parts.empty() || parts.size() > 2) a2e_pattern_illegal_(s);
        std::vector<int> numbers;
        for (size_t i = 0; i < parts.size(); i++) {
            int number;
            if (parts[i].empty() || sscanf(parts[i].c_str(), "%d", &number) != 1)
                a2e_pattern_illegal_(s);
            numbers.push_back(number);
        }
        from = numbers[0];
        to = numbers.back();
        if (from > to) a2e_pattern_illegal_(s);
    } else if (a2e_pattern_command_(s, pos, '?')) {
        from = 0, to = 1, pos++;
    } else if (a2e_pattern_command_(s, pos, '*')) {
        from = 0, to = INT_MAX, pos++;
    } else if (a2e_pattern_command_(s, pos, '+')) {
        from = 1, to = INT_MAX, pos++;
    }
}

// One character, or a [set] of them: ranges a-z, a '-' first or last as itself, [^...] every
// character code 0 to 254 but those.
static inline std::vector<char> a2e_pattern_set_(const std::string& s, size_t& pos) {
    if (pos >= s.size()) a2e_pattern_illegal_(s);
    std::vector<char> set;
    if (!a2e_pattern_command_(s, pos, '[')) {
        set.push_back(a2e_pattern_char_(s, pos));
        return set;
    }
    pos++;
    bool negated = a2e_pattern_command_(s, pos, '^');
    if (negated) pos++;
    char prev = 0;
    while (pos < s.size() && !a2e_pattern_command_(s, pos, ']')) {
        if (a2e_pattern_command_(s, pos, '-') && prev != 0) {
            pos++;
            if (pos + 1 == s.size() || a2e_pattern_command_(s, pos, ']')) {
                set.push_back(prev);
                prev = '-';
                continue;
            }
            char last = a2e_pattern_char_(s, pos);
            if (prev > last) a2e_pattern_illegal_(s);
            for (char c = prev; c != last; c++) set.push_back(c);
            set.push_back(last);
            prev = 0;
        } else {
            if (prev != 0) set.push_back(prev);
            prev = a2e_pattern_char_(s, pos);
        }
    }
    if (prev != 0) set.push_back(prev);
    if (!a2e_pattern_command_(s, pos, ']')) a2e_pattern_illegal_(s);
    pos++;
    std::sort(set.begin(), set.end());
    if (negated) {
        std::vector<char> others;
        for (int code = 0; code < 255; code++)
            if (!std::binary_search(set.begin(), set.end(), (char)code)) others.push_back((char)code);
        set = others;
        std::sort(set.begin(), set.end());
    }
    return set;
}

inline pattern::pattern(std::string s) : src_(s) {
    std::string kept;
    for (size_t i = 0; i < s.size(); i++)
        if (!a2e_pattern_command_(s, i, ' ')) kept += s[i];
    s = kept;
    int opened = 0;
    int firstClose = -1;
    std::vector<size_t> bars;
    for (size_t i = 0; i < s.size(); i++) {
        if (a2e_pattern_command_(s, i, '(')) {
            opened++;
            continue;
        }
        if (a2e_pattern_command_(s, i, ')')) {
            opened--;
            if (opened == 0 && firstClose == -1) firstClose = (int)i;
            continue;
        }
        if (opened < 0) a2e_pattern_illegal_(s);
        if (a2e_pattern_command_(s, i, '|') && opened == 0) bars.push_back(i);
    }
    if (opened != 0) a2e_pattern_illegal_(s);
    if (bars.empty() && firstClose + 1 == (int)s.size() && a2e_pattern_command_(s, 0, '(') &&
        a2e_pattern_command_(s, s.size() - 1, ')')) {
        children_.push_back(pattern(s.substr(1, s.size() - 2)));
    } else if (!bars.empty()) {
        bars.push_back(s.size());
        size_t start = 0;
        for (size_t i = 0; i < bars.size(); i++) {
            children_.push_back(pattern(s.substr(start, bars[i] - start)));
            start = bars[i] + 1;
        }
    } else {
        size_t pos = 0;
        chars_ = a2e_pattern_set_(s, pos);
        a2e_pattern_counts_(s, pos, from_, to_);
        if (pos < s.size()) children_.push_back(pattern(s.substr(pos)));
    }
}

inline bool pattern::matchesFrom_(const std::string& s, size_t pos) const {
    if (to_ > 0) {
        int taken = 0;
        while (pos + taken < s.size() &&
               std::binary_search(chars_.begin(), chars_.end(), s[pos + taken]))
            taken++;
        if (taken < from_) return false;
        pos += (size_t)std::min(taken, to_);
    }
    if (children_.empty()) return pos == s.size();
    for (size_t i = 0; i < children_.size(); i++)
        if (children_[i].matchesFrom_(s, pos)) return true;
    return false;
}

static inline void quitif(bool condition, TResult result, const char* fmt, ...) {
    if (!condition) return;
    va_list args;
    va_start(args, fmt);
    std::string message = vformat_(fmt, args);
    va_end(args);
    ouf.quit(result, message);
}

static inline std::string a2e_testlib_points(double points) {
    std::string text = format("%.10f", points);
    while (text.size() > 1 && text[text.size() - 1] == '0' && text[text.size() - 2] != '.')
        text.erase(text.size() - 1);
    return text;
}

NORETURN static inline void a2e_testlib_quitp(const std::string& points, double value,
                                              const std::string& message) {
    if (std::isnan(value)) quit(_fail, "Parameter 'points' can't be nan");
    if (std::fabs(value) > 1E300) quit(_fail, "Parameter 'points' can't be infinite");
    if (value < -1E-8) quit(_fail, "Parameter 'points' can't be negative");
    if (value > 1E6 + 1E-8) quit(_fail, "Parameter 'points' can't be greater than 1E6");
    quit(_points, points + (message.empty() ? "" : " " + message));
}

NORETURN static inline void quitp(double points, const std::string& message = "") {
    double value = points <= 0 ? 0 : std::min(points, 1E6);
    a2e_testlib_quitp(a2e_testlib_points(value), points, message);
}

NORETURN static inline void quitp(float points, const std::string& message = "") {
    quitp((double)points, message);
}
NORETURN static inline void quitp(long double points, const std::string& message = "") {
    quitp((double)points, message);
}
NORETURN static inline void quitp(int points, const std::string& message = "") {
    a2e_testlib_quitp(vtos(points < 0 ? 0 : points), points, message);
}

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
NORETURN static inline void
quitp(double points, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string message = vformat_(fmt, args);
    va_end(args);
    quitp(points, message);
}

NORETURN static inline void quitpi(const std::string& points_info,
                                   const std::string& message = "") {
    if (points_info.find(' ') != std::string::npos)
        quit(_fail, "Parameter 'points_info' can't contain spaces");
    quit(_points, "points_info=" + points_info + (message.empty() ? "" : " " + message));
}

template <typename T>
NORETURN static inline void expectedButFound(TResult result, T expected, T found,
                                             const char* prepend = "", ...) {
    std::string message =
        "expected '" + compress(vtos(expected)) + "', but found '" + compress(vtos(found)) + "'";
    if (prepend && *prepend) {
        va_list args;
        va_start(args, prepend);
        message = vformat_(prepend, args) + ": " + message;
        va_end(args);
    }
    quit(result, message);
}

#define ensure(cond) \
    (void)((cond) || (quit(_fail, std::string("Condition failed: \"") + #cond + "\""), 0))
#define ensure_ext(cond) \
    (void)((cond) || (quit(_fail, format("Line %d: Condition failed: \"%s\"", __LINE__, #cond)), 0))

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
static inline void
ensuref(bool condition, const char* fmt, ...) {
    if (condition) return;
    va_list args;
    va_start(args, fmt);
    std::string message = vformat_(fmt, args);
    va_end(args);
    quit(_fail, message);
}

// -- registration ---------------------------------------------------------------------------

static inline std::vector<std::string> a2e_testlib_positional(int argc, char* argv[]) {
    std::vector<std::string> positional;
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        if ((arg == "--testset" || arg == "--group") && i + 1 < argc) {
            i++;
            continue;
        }
        positional.push_back(arg);
    }
    return positional;
}

static inline void registerTestlibCmd(int argc, char* argv[]) {
    a2e_testlib_run.registered = true;
    a2e_testlib_run.checker = true;
    std::vector<std::string> args = a2e_testlib_positional(argc, argv);
    ouf.mode = _output;
    if (args.size() < 3 || args.size() > 5)
        quit(_fail,
             "Program must be run with the following arguments: <input-file> <output-file> "
             "<answer-file> [<report-file> [<-appes>]]");
    inf.openFile(args[0], _input);
    inf.opened = true;
    ouf.openFile(args[1], _output);
    if (!ouf.opened) ouf.quit(_pe, "Output file not found: \"" + args[1] + "\"");
    ouf.skipBom();
    ans.openFile(args[2], _answer);
    if (!ans.opened) {
        a2e_testlib_exit(_fail, "Answer file not found: \"" + args[2] + "\"");
    }
    if (args.size() >= 4) a2e_testlib_run.resultFile = args[3];
}

static inline void registerInteraction(int argc, char* argv[]) {
    a2e_testlib_run.registered = true;
    a2e_testlib_run.interactor = true;
    std::vector<std::string> args = a2e_testlib_positional(argc, argv);
    ouf.mode = _output;
    if (args.size() < 2 || args.size() > 5)
        quit(_fail,
             "Program must be run with the following arguments: <input-file> <output-file> "
             "[<answer-file> [<report-file> [<-appes>]]]");
    inf.openFile(args[0], _input);
    inf.opened = true;
    tout.open(args[1].c_str(), std::ios_base::out);
    if (!tout.is_open()) quit(_fail, "Can not write to the test-output-file '" + args[1] + "'");
    ouf.openStdin(_output);
    if (args.size() >= 3)
        ans.openFile(args[2], _answer);
    else
        ans.name = "unopened answer stream";
    if (args.size() >= 4) a2e_testlib_run.resultFile = args[3];
}

// A validator reads the test from stdin, strictly: exact spaces and line ends.
static inline void registerValidation() {
    a2e_testlib_run.registered = true;
    a2e_testlib_run.validator = true;
    inf.name = "stdin";
    inf.mode = _input;
    inf.strict = true;
    inf.opened = true;
    std::ostringstream all;
    all << std::cin.rdbuf();
    inf = InStream(inf, all.str());
    inf.name = "stdin";
}

// --testset and --group, which validator.testset() and validator.group() give back.
static inline void registerValidation(int argc, char* argv[]) {
    registerValidation();
    for (int i = 1; i < argc; i++) {
        std::string option = argv[i];
        if (option != "--testset" && option != "--group") continue;
        bool given = i + 1 < argc && (option == "--group" || argv[i + 1][0] != '\0');
        if (!given)
            quit(_fail, option == "--testset"
                            ? "Expected non-empty testset after --testset command line parameter"
                            : "Expected group after --group command line parameter");
        (option == "--testset" ? a2e_testlib_run.testset : a2e_testlib_run.group) = argv[++i];
    }
    a2e_testlib_run.validatorArguments = true;
}

// What a validator was told of the test it validates (registerValidation(argc, argv)).
struct a2e_validator_ {
    a2e_validator_() {}  // made, like rnd, whether a program uses it or not: no unused warning

    std::string testset() const {
        if (!a2e_testlib_run.validatorArguments)
            quit(_fail, "Validator should be initialized with registerValidation(argc, argv) "
                        "instead of registerValidation() to support validator.testset()");
        return a2e_testlib_run.testset;
    }
    std::string group() const {
        if (!a2e_testlib_run.validatorArguments)
            quit(_fail, "Validator should be initialized with registerValidation(argc, argv) "
                        "instead of registerValidation() to support validator.group()");
        return a2e_testlib_run.group;
    }
};

static a2e_validator_ validator;

// -- random numbers (what a checker that probes an answer at random uses) --------------------

class random_t {
public:
    // registerGen's version: 0 draws a 63-bit number from two 31-bit draws, as testlib did before
    // 0.8.7; 1 (and a program that never registers) from a 31-bit and a 32-bit one.
    static inline int version = -1;

    random_t() : seed_(3905348978240129619ULL) {}

    // The seed of a command line: each byte of each argument (a char as the compiler signs it)
    // stirred in, then a constant after each argument.
    void setSeed(int argc, char* argv[]) {
        seed_ = 3905348978240129619ULL;
        for (int i = 1; i < argc; i++) {
            for (const char* c = argv[i]; *c; c++)
                seed_ = seed_ * kMultiplier_ + (unsigned int)(*c) + kAddend_;
            seed_ += kMultiplier_ / kAddend_;
        }
        seed_ &= kMask_;
    }

    void setSeed(long long seed) { seed_ = ((unsigned long long)seed ^ kMultiplier_) & kMask_; }

    // [0, n): a power of two from the high bits of one draw, any other n by rejecting the
    // draws past the last whole multiple of it, so that every value is as likely.
    int next(int n) {
        if (n <= 0) quit(_fail, "random_t::next(int n): n must be positive");
        if ((n & -n) == n) return (int)((n * (long long)nextBits_(31)) >> 31);
        long long limit = INT_MAX / n * n;
        long long bits = nextBits_(31);
        while (bits >= limit) bits = nextBits_(31);
        return (int)(bits % n);
    }

    unsigned int next(unsigned int n) {
        if (n >= INT_MAX) quit(_fail, "random_t::next(unsigned int n): n must be less INT_MAX");
        return (unsigned int)next((int)n);
    }

    long long next(long long n) {
        if (n <= 0) quit(_fail, "random_t::next(long long n): n must be positive");
        long long limit = LLONG_MAX / n * n;
        long long bits = nextBits_(63);
        while (bits >= limit) bits = nextBits_(63);
        return bits % n;
    }

    unsigned long long next(unsigned long long n) {
        if (n >= (unsigned long long)LLONG_MAX)
            quit(_fail, "random_t::next(unsigned long long n): n must be less LONGLONG_MAX");
        return (unsigned long long)next((long long)n);
    }

    long next(long n) { return (long)next((long long)n); }

    unsigned long next(unsigned long n) {
        if (n >= (unsigned long)LONG_MAX)
            quit(_fail, "random_t::next(unsigned long n): n must be less LONG_MAX");
        return (unsigned long)next((unsigned long long)n);
    }

    // [from, to]
    int next(int from, int to) { return (int)(next((long long)to - from + 1) + from); }
    unsigned int next(unsigned int from, unsigned int to) {
        return (unsigned int)(next((long long)to - from + 1) + from);
    }
    long long next(long long from, long long to) { return next(to - from + 1) + from; }
    unsigned long long next(unsigned long long from, unsigned long long to) {
        if (from > to) quit(_fail, "random_t::next(unsigned long long from, unsigned long long "
                                   "to): from can't not exceed to");
        return next(to - from + 1) + from;
    }
    long next(long from, long to) { return next(to - from + 1) + from; }
    unsigned long next(unsigned long from, unsigned long to) {
        if (from > to)
            quit(_fail, "random_t::next(unsigned long from, unsigned long to): from can't not "
                        "exceed to");
        return next(to - from + 1) + from;
    }

    // [0, 1), from 53 bits of two draws; [0, n); [from, to).
    double next() {
        long long high = (long long)nextBits_(26) << 27;
        long long low = nextBits_(27);
        return below_((double)(high + low) / (double)(1LL << 53), 0.0, 1.0);
    }
    double next(double n) {
        if (n <= 0.0) quit(_fail, "random_t::next(double): n should be positive");
        return below_(n * next(), 0.0, n);
    }
    double next(double from, double to) {
        if (from >= to)
            quit(_fail, "random_t::next(double from, double to): from should be strictly less "
                        "than to");
        return next(to - from) + from;
    }

    std::string next(const std::string& ptrn);
    std::string next(const pattern& p);

    // Weighted: the largest of type + 1 draws (the smallest of -type + 1 for a negative type);
    // past kWeightDraws_ draws, the same distribution from one draw raised to a power.
    int wnext(int n, int type) {
        if (n <= 0) quit(_fail, "random_t::wnext(int n, int type): n must be positive");
        return weighted_(n, type);
    }

    long long wnext(long long n, int type) {
        if (n <= 0) quit(_fail, "random_t::wnext(long long n, int type): n must be positive");
        return weighted_(n, type);
    }

    double wnext(double n, int type) {
        if (n <= 0) quit(_fail, "random_t::wnext(double n, int type): n must be positive");
        if (std::abs(type) >= kWeightDraws_) return below_(n * power_(type), 0.0, n);
        double result = next();
        for (int i = 0; i < type; i++) result = std::max(result, next());
        for (int i = 0; i < -type; i++) result = std::min(result, next());
        return n * result;
    }

    double wnext(int type) { return wnext(1.0, type); }

    unsigned int wnext(unsigned int n, int type) {
        if (n >= INT_MAX)
            quit(_fail, "random_t::wnext(unsigned int n, int type): n must be less INT_MAX");
        return (unsigned int)wnext((int)n, type);
    }

    unsigned long long wnext(unsigned long long n, int type) {
        if (n >= (unsigned long long)LLONG_MAX)
            quit(_fail, "random_t::wnext(unsigned long long n, int type): n must be less "
                        "LONGLONG_MAX");
        return (unsigned long long)wnext((long long)n, type);
    }

    long wnext(long n, int type) { return (long)wnext((long long)n, type); }

    unsigned long wnext(unsigned long n, int type) {
        if (n >= (unsigned long)LONG_MAX)
            quit(_fail, "random_t::wnext(unsigned long n, int type): n must be less LONG_MAX");
        return (unsigned long)wnext((unsigned long long)n, type);
    }

    int wnext(int from, int to, int type) {
        if (from > to)
            quit(_fail, "random_t::wnext(int from, int to, int type): from can't not exceed to");
        return wnext(to - from + 1, type) + from;
    }
    long long wnext(long long from, long long to, int type) {
        if (from > to)
            quit(_fail, "random_t::wnext(long long from, long long to, int type): from can't not "
                        "exceed to");
        return wnext(to - from + 1, type) + from;
    }
    double wnext(double from, double to, int type) {
        if (from >= to)
            quit(_fail, "random_t::wnext(double from, double to, int type): from should be "
                        "strictly less than to");
        return wnext(to - from, type) + from;
    }

    template <typename C>
    typename C::value_type any(const C& items) {
        int size = (int)items.size();
        if (size <= 0) quit(_fail, "random_t::any(const Container& c): c.size() must be positive");
        typename C::const_iterator it = items.begin();
        std::advance(it, next(size));
        return *it;
    }

    template <typename C>
    typename C::value_type wany(const C& items, int type) {
        int size = (int)items.size();
        if (size <= 0)
            quit(_fail, "random_t::wany(const Container& c, int type): c.size() must be positive");
        typename C::const_iterator it = items.begin();
        std::advance(it, wnext(size, type));
        return *it;
    }

    // first, first + 1, ... shuffled: each place from 1 on swapped with one at or before it.
    template <typename T, typename E>
    std::vector<E> perm(T size, E first) {
        if (size < 0) quit(_fail, "random_t::perm(T size, E first = 0): size must non-negative");
        std::vector<E> items(size);
        E current = first;
        for (T i = 0; i < size; i++) items[i] = current++;
        for (T i = 1; i < size; i++) std::swap(items[i], items[next(i + 1)]);
        return items;
    }

    template <typename T>
    std::vector<T> perm(T size) {
        return perm(size, T(0));
    }

    // ``size`` distinct values of [from, to], in the order drawn: drawn until enough differ
    // when that is expected to take fewer draws than the range holds, else a permutation's
    // first ``size``.
    template <typename T>
    std::vector<T> distinct(int size, T from, T to) {
        std::vector<T> result;
        if (size == 0) return result;
        if (from > to) quit(_fail, "random_t::distinct expected from <= to");
        if (size < 0) quit(_fail, "random_t::distinct expected size >= 0");
        unsigned long long n = (unsigned long long)(to - from) + 1;
        if ((unsigned long long)size > n)
            quit(_fail, "random_t::distinct expected size <= to - from + 1");
        double expected = 0.0;
        for (int i = 1; i <= size; i++) expected += (double)n / (double)(n - i + 1);
        if (expected < (double)n) {
            std::set<T> seen;
            while ((int)seen.size() < size) {
                T value = T(next(from, to));
                if (seen.insert(value).second) result.push_back(value);
            }
            return result;
        }
        if (n > 1000000000)
            quit(_fail, "random_t::distinct here expected to - from + 1 <= 1000000000");
        std::vector<T> all = perm((int)n, from);
        result.insert(result.end(), all.begin(), all.begin() + size);
        return result;
    }

    template <typename T>
    std::vector<T> distinct(int size, T upper) {
        if (size < 0) quit(_fail, "random_t::distinct expected size >= 0");
        if (size == 0) return std::vector<T>();
        if (upper <= 0) quit(_fail, "random_t::distinct expected upper > 0");
        if (size > upper) quit(_fail, "random_t::distinct expected size <= upper");
        return distinct(size, T(0), upper - 1);
    }

    // ``sum`` as ``size`` parts of at least ``min_part`` each, in random order: the cuts
    // between them distinct points of the range, sorted.
    template <typename T>
    std::vector<T> partition(int size, T sum, T min_part) {
        if (size < 0) quit(_fail, "random_t::partition: size < 0");
        if (size == 0 && sum != 0) quit(_fail, "random_t::partition: size == 0 && sum != 0");
        if (min_part * size > sum) quit(_fail, "random_t::partition: min_part * size > sum");
        if (size == 0) return std::vector<T>();
        T spare = sum - min_part * size;
        std::vector<T> cuts(size);
        std::vector<T> drawn = distinct(size - 1, T(1), T(spare + size - 1));
        for (int i = 0; i + 1 < size; i++) cuts[i + 1] = drawn[i];
        std::sort(cuts.begin(), cuts.end());
        std::vector<T> parts(size);
        for (int i = 0; i + 1 < size; i++) parts[i] = cuts[i + 1] - cuts[i] - 1 + min_part;
        parts[size - 1] = spare + size - 1 - cuts.back() + min_part;
        return parts;
    }

    template <typename T>
    std::vector<T> partition(int size, T sum) {
        return partition(size, sum, T(1));
    }

private:
    static const unsigned long long kMultiplier_ = 0x5DEECE66DULL;
    static const unsigned long long kAddend_ = 0xBULL;
    static const unsigned long long kMask_ = (1ULL << 48) - 1;
    static const int kWeightDraws_ = 25;
    unsigned long long seed_;

    // The next ``bits`` of a 48-bit linear congruential generator (java.util.Random's); more
    // than 48 from two draws, as ``version`` says.
    long long nextBits_(int bits) {
        if (bits <= 48) {
            seed_ = (seed_ * kMultiplier_ + kAddend_) & kMask_;
            return (long long)(seed_ >> (48 - bits));
        }
        if (bits > 63) quit(_fail, "random_t::nextBits(int bits): n must be less than 64");
        long long high = nextBits_(31) << 32;
        long long low = nextBits_(version == 0 ? 31 : 32);
        return high ^ low;
    }

    // wnext of [0, n), n > 0, for an integer type: ``next(n)`` of that type, drawn as
    // testlib draws it.
    template <typename T>
    T weighted_(T n, int type) {
        if (std::abs(type) >= kWeightDraws_) return below_((T)((double)n * power_(type)), T(0), n);
        T result = next(n);
        for (int i = 0; i < type; i++) result = std::max(result, next(n));
        for (int i = 0; i < -type; i++) result = std::min(result, next(n));
        return result;
    }

    // One draw raised to the power that weighs it as ``type`` + 1 draws would.
    double power_(int type) {
        if (type > 0) return std::pow(next() + 0.0, 1.0 / (type + 1));
        return 1 - std::pow(next() + 0.0, 1.0 / (-type + 1));
    }

    // ``value`` within [low, high): an integer at most high - 1, a double below high.
    template <typename T>
    static T below_(T value, T low, T high) {
        return std::min(std::max(value, low), high - 1);
    }
    static double below_(double value, double low, double high) {
        value = std::min(std::max(value, low), high);
        return value >= high ? std::nexttoward(high, low) : value;
    }
};

static random_t rnd;

// A string the pattern matches: each set's count, each character and each alternative drawn
// from ``rnd`` in turn (a '*' or '+' has no bound to draw from).
inline std::string pattern::next(random_t& random) const {
    if (to_ == INT_MAX)
        quit(_fail, "pattern::next(random_t& rnd): can't process character '*' for generation");
    std::string result;
    if (to_ > 0) {
        int count = random.next(to_ - from_ + 1) + from_;
        for (int i = 0; i < count; i++) result += chars_[random.next((int)chars_.size())];
    }
    if (!children_.empty()) result += children_[random.next((int)children_.size())].next(random);
    return result;
}

inline std::string random_t::next(const std::string& ptrn) { return pattern(ptrn).next(*this); }
inline std::string random_t::next(const pattern& p) { return p.next(*this); }

template <typename It>
static inline void shuffle(It begin, It end) {
    for (It i = begin + 1; i < end; ++i) std::iter_swap(i, begin + rnd.next((int)(i - begin) + 1));
}

static inline void registerGen(int argc, char* argv[], int version) {
    if (version < 0 || version > 1) quit(_fail, "Random generator version is expected to be 0 or 1.");
    random_t::version = version;
    a2e_testlib_run.registered = true;
    rnd.setSeed(argc, argv);
}

// The form before random generator versions: version 0, said on stderr as testlib says it.
static inline void registerGen(int argc, char* argv[]) {
    std::fprintf(stderr, "Use registerGen(argc, argv, 0) or registerGen(argc, argv, 1).\n\n");
    registerGen(argc, argv, 0);
}

#endif
