dlock::guard dlock :: guard [[ dlock::guard ]] ]] [[ ( ) :: using dlock : guard ,,, "
[[dlock::guard("x", name=[[]]{(})]] void f() {}
[[using dlock: guard("k:<id>"), dlock::guard("j")]] void g(int id) {}
