// Any shortest path from 1 to n in an undirected graph: the input is "n m" and m edges, the
// jury's answer the path's length in edges; the output a path (its vertices, 1 first, n last).
#include "testlib.h"
#include <set>
using namespace std;
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt(), m = inf.readInt();
    set<pair<int, int>> edges;
    for (int i = 0; i < m; i++) {
        int a = inf.readInt(), b = inf.readInt();
        edges.insert({min(a, b), max(a, b)});
    }
    int shortest = ans.readInt();
    vector<int> path;
    while (!ouf.seekEof()) path.push_back(ouf.readInt(1, n, "vertex"));
    if (path.empty() || path.front() != 1 || path.back() != n)
        quitf(_wa, "the path must go from 1 to %d", n);
    for (size_t i = 1; i < path.size(); i++) {
        int a = path[i - 1], b = path[i];
        if (!edges.count({min(a, b), max(a, b)})) quitf(_wa, "no edge %d-%d", a, b);
    }
    int length = (int)path.size() - 1;
    if (length > shortest)
        quitf(_wa, "a path of %d edges, not the shortest (%d)", length, shortest);
    if (length < shortest)
        quitf(_fail, "a path of %d edges, shorter than the jury's %d", length, shortest);
    quitf(_ok, "a shortest path of %d edges", length);
}
