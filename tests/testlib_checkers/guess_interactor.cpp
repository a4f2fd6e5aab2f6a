// Binary search game: the hidden number from the input, at most 20 questions "? x", answered
// "<", ">" or "="; the participant ends with "! x".
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerInteraction(argc, argv);
    int hidden = inf.readInt(1, 1000000, "hidden");
    for (int asked = 0;; asked++) {
        std::string what = ouf.readToken();
        int x = ouf.readInt(1, 1000000, "x");
        if (what == "!") {
            tout << x << std::endl;
            if (x != hidden) quitf(_wa, "guessed %d, the number was %d", x, hidden);
            quitf(_ok, "found in %d questions", asked);
        }
        if (what != "?") quitf(_pe, "expected ? or !, found %s", compress(what).c_str());
        if (asked == 20) quitf(_wa, "more than 20 questions");
        std::cout << (x < hidden ? ">" : x > hidden ? "<" : "=") << std::endl;
    }
}
