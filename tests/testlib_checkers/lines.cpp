// Written for these tests: lines compared as testlib's line checkers read them (readLine), each
// difference told by the lines' lengths and last characters, which show a CR or EOF kept.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = 0;
    while (!ans.eof()) {
        std::string j = ans.readLine();
        if (ouf.eof()) quitf(_wa, "line %d is missing", n + 1);
        std::string p = ouf.readLine();
        n++;
        if (j != p)
            quitf(_wa, "line %d differs: %d characters, the last %d", n, (int)p.size(),
                  p.empty() ? -1 : (int)(unsigned char)p.back());
    }
    quitf(_ok, "%d lines", n);
}
