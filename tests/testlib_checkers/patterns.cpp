// Written for these tests: what a validator or checker reads against testlib's patterns, the
// answer file naming which read; "greedy" shows testlib's matching, which never gives back a
// character a set took ("[0-9]?1" does not match "1").
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    std::string read = ans.readToken();
    if (read == "token") ouf.readToken("[a-z]{1,3}");
    if (read == "named") ouf.readToken("[a-z]{1,3}", "s");
    if (read == "tokens") ouf.readTokens(3, "[0-9]+", "a");
    if (read == "line") ouf.readLine("NO\\ SOLUTION|[0-9]+\\ [0-9]+");
    if (read == "group") pattern("[0-9]+( [0-9]+)?");  // a group with a count: not testlib's
    if (read == "lines") ouf.readLines(2, "x+", "row", 0);
    if (read == "greedy") {
        std::string token = ouf.readToken();
        quitf(_ok, "%d%d%d", (int)pattern("[0-9]?1").matches(token),
              (int)pattern("0|-?[1-9][0-9]*").matches(token), (int)pattern("id-([ac]|b{2})").matches(token));
    }
    quitf(_ok, "read");
}
