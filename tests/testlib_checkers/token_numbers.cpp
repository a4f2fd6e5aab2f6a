// Written for these tests: tokens read first and then as numbers (testlib's stringToLongLong,
// stringToUnsignedLongLong, stringToDouble, stringToStrictDouble), as a checker that reads a
// line's tokens before it knows what they are does.
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    std::string kind = ans.readToken();
    std::string token = ouf.readToken();
    if (kind == "long") quitf(_ok, "%lld", stringToLongLong(ouf, token));
    if (kind == "unsigned") quitf(_ok, "%llu", stringToUnsignedLongLong(ouf, token));
    if (kind == "double") quitf(_ok, "%.3f", stringToDouble(ouf, token));
    quitf(_ok, "%.3f", stringToStrictDouble(ouf, token, 1, 2));
}
