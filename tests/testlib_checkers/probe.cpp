// Not a checker: each test names in its input what to do with the output file, so that every
// part of the header a checker calls is exercised by one program.
#include "testlib.h"
using namespace std;
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    string op = inf.readToken();
    if (op == "lines") {
        vector<string> lines;
        while (!ouf.eof()) lines.push_back(ouf.readLine());
        quitf(_ok, "%d lines: %s", (int)lines.size(), join(lines, '|').c_str());
    } else if (op == "eoln") {
        int a = ouf.readInt();
        bool first = ouf.eoln();
        bool second = ouf.seekEoln();
        quitf(_ok, "%d %d %d", a, (int)first, (int)second);
    } else if (op == "eof") {
        ouf.readToken();
        ouf.readEof();
        quitf(_ok, "at the end");
    } else if (op == "space") {
        int a = ouf.readInt();
        ouf.readSpace();
        ouf.readChar('x');
        ouf.readEoln();
        quitf(_ok, "%d then a space, x and a line end", a);
    } else if (op == "strict") {
        double d = ouf.readStrictDouble(0, 10, 1, 2, "d");
        quitf(_ok, "%.2f", d);
    } else if (op == "long") {
        long long v = ouf.readLong(-1000000000000000000LL, 1000000000000000000LL, "v");
        unsigned long long u = ouf.readUnsignedLong();
        quitf(_ok, "%lld %llu", v, u);
    } else if (op == "range") {
        ouf.readInt(1, 1000000000, "k");
        quitf(_ok, "in range");
    } else if (op == "stream-ensuref") {
        ouf.ensuref(false, "bad %d", 7);
    } else if (op == "ensuref") {
        ensuref(false, "jury's fault %d", 7);
    } else if (op == "ensure") {
        ensure(1 + 1 == 3);
    } else if (op == "quitif") {
        quitif(false, _wa, "not this");
        quitif(true, _wa, "this one");
    } else if (op == "expected") {
        expectedButFound(_wa, 5, 6, "case %d", 2);
    } else if (op == "pc") {
        quitf(_pc(3), "partly");
    } else if (op == "nan-points") {
        quitp(nan(""));
    } else if (op == "ans-wa") {
        ans.quitf(_wa, "the jury's answer is wrong");
    } else if (op == "helpers") {
        string s = format("%05d", 42) + " " + vtos(1e-7) + " " + toString(3) + " " +
                   upperCase("aBc") + lowerCase("DeF") + " [" + trim("  x y \n") + "] " +
                   join(split("a,,b", ','), '/') + " " + join(tokenize("a,,b", ','), '/') + " " +
                   englishEnding(1) + englishEnding(2) + englishEnding(3) + englishEnding(11) +
                   englishEnding(22) + " " + toHumanReadableString(2000000000LL) + " " +
                   compress(string(70, 'z'));
        quitf(_ok, "%s", s.c_str());
    } else if (op == "doubles") {
        string r;
        r += doubleCompare(1.0, 1.0000009, 1e-6) ? "T" : "F";
        r += doubleCompare(1.0, 1.0000011, 1e-6) ? "T" : "F";
        r += doubleCompare(1e9, 1e9 + 999, 1e-6) ? "T" : "F";
        r += doubleCompare(1e9, 1e9 + 1001, 1e-6) ? "T" : "F";
        r += doubleCompare(nan(""), nan(""), 1e-6) ? "T" : "F";
        r += doubleCompare(1e301, 1e302, 1e-6) ? "T" : "F";
        r += doubleCompare(0, 1e-7, 1e-6) ? "T" : "F";
        quitf(_ok, "%s %.3f", r.c_str(), doubleDelta(100, 101));
    } else if (op == "rnd") {
        vector<int> p = rnd.perm(5, 1);
        sort(p.begin(), p.end());
        int x = rnd.next(3, 7);
        double d = rnd.next();
        quitf(_ok, "%s %d %d", join(p).c_str(), (int)(3 <= x && x <= 7), (int)(0 <= d && d < 1));
    } else if (op == "aliases") {
        vector<int> a = ouf.readIntegers(2, 0, 9, "a");
        vector<long long> b = ouf.readLongs(2, 0, 99, "b");
        vector<double> c = ouf.readDoubles(1, 0, 1, "c");
        vector<double> d = ouf.readReals(1, 0, 1, "d");
        double e = ouf.readReal(0, 1, "e");
        double f = ouf.readStrictReal(0, 1, 1, 1, "f");
        int g = ouf.readInteger();
        vector<string> h = ouf.readTokens(2);
        vector<string> i = ouf.readWords(1);
        ouf.skipBlanks();
        string j = ouf.readString();
        vector<string> k = ouf.readStrings(1);
        ouf.nextLine();
        vector<string> l = ouf.readLines(1);
        quitf(_ok, "%d%d %lld%lld %.1f %.1f %.1f %.1f %d %s%s%s [%s] [%s] [%s]", a[0], a[1], b[0],
              b[1], c[0], d[0], e, f, g, h[0].c_str(), h[1].c_str(), i[0].c_str(), j.c_str(),
              k[0].c_str(), l[0].c_str());
    } else if (op == "quitpi") {
        quitpi(ouf.readToken(), "as given");
    } else if (op == "based") {
        string line = ouf.readLine();
        InStream again(ouf, line);
        int a = again.readInt(), b = again.readInt();
        quitf(_ok, "%d", a + b);
    }
    quitf(_fail, "no such operation %s", op.c_str());
}
