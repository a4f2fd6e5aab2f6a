// A scored checker: full points for the answer, half for another number.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int j = ans.readInt();
    int p = ouf.readInt();
    quitp(p == j ? 1.0 : 0.5, "got %d", p);
}
