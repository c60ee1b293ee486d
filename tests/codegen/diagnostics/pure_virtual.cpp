// A pure virtual function without a body: the overriders are what runs.
struct Job {
  virtual ~Job() = default;
  [[dlock::guard("job:run")]] virtual void run() = 0;
  // CHECK: :[[@LINE-1]]:5: error: a pure virtual function without a body cannot be guarded; guard the overriding functions
};
