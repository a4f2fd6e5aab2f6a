// A failed Debug.Assert or Trace.Assert ends the program, as it does under .NET (SandboxFusion
// runs C# with `dotnet run`, a Debug build): Mono's default listener only logs it, so a
// HumanEval, MultiPL-E or MBXP test that asserts with Debug.Assert would pass whatever the
// answer. Compiled into every C# program and named by main.exe.config; every name is written
// in full, so that a program's own types (a class named Console) cannot change what it means.
namespace A2eEngine.Runtime
{
    public sealed class FailFastListener : global::System.Diagnostics.DefaultTraceListener
    {
        public override void Write(string message) { }

        public override void WriteLine(string message) { }

        public override void Fail(string message, string detail)
        {
            global::System.Console.Out.Flush();
            global::System.Console.Error.WriteLine("Process terminated. Assertion failed."
                + (string.IsNullOrEmpty(message) ? "" : "\n" + message)
                + (string.IsNullOrEmpty(detail) ? "" : "\n" + detail));
            global::System.Console.Error.WriteLine(new global::System.Diagnostics.StackTrace(2, true));
            global::System.Environment.Exit(134);
        }
    }
}
