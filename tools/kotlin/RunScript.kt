// Runs a Kotlin script compiled ahead (kotlinc main.kts -d .): the script is the class `Main`,
// whose constructor is its body, and that class has no `main` for `java` to start. Thrown out
// of the script, an exception leaves as the script's own, with its stack and exit status 1.
@file:JvmName("RunScript")

fun main(args: Array<String>) {
    val script = Class.forName("Main")
    try {
        script.getConstructor(Array<String>::class.java).newInstance(args)
    } catch (e: java.lang.reflect.InvocationTargetException) {
        throw e.cause ?: e
    }
}
